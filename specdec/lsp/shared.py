"""One generation per document, text and settings, shared by every request that wants it.

Contract: ``Shared.get(key, start)`` awaits the result of ``start()`` (a coroutine function),
started once per ``key`` while it runs: a completion and an inline completion for the same
document and cursor (VS Code sends both) get the same answer from one generation instead of
cancelling each other. A waiter cancelled by its client (``$/cancelRequest``) leaves; the
generation is cancelled only when no waiter is left. A finished key is forgotten.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any


class _Run:
    def __init__(self, task: asyncio.Task) -> None:
        self.task, self.waiters = task, 0


class Shared:
    def __init__(self) -> None:
        self._runs: dict[Hashable, _Run] = {}

    def __len__(self) -> int:
        return len(self._runs)

    async def get(self, key: Hashable, start: Callable[[], Awaitable[Any]]) -> Any:
        run = self._runs.get(key)
        if run is None:
            run = self._runs[key] = _Run(asyncio.ensure_future(start()))
            run.task.add_done_callback(lambda _t, k=key, r=run: self._drop(k, r))
        run.waiters += 1
        try:
            return await asyncio.shield(run.task)
        except asyncio.CancelledError:
            if not run.task.done() and run.waiters == 1:
                run.task.cancel()  # the last one waiting: stop the generation
                try:
                    await run.task  # it reports itself cancelled before the client hears of it
                except BaseException:
                    pass
            raise
        finally:
            run.waiters -= 1

    def _drop(self, key: Hashable, run: _Run) -> None:
        if self._runs.get(key) is run:
            del self._runs[key]
