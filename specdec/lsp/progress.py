"""Work-done progress of one completion request (the client's ``workDoneToken``).

Contract: ``Progress(server, token, method)``: ``step(stats)`` begins the progress at the first
engine step and reports the tokens so far at each; ``end()`` ends it however the request ended.
Nothing is sent when the request carries no token. (The model's loading has its own progress:
``specdec/lsp/startup.py``.)
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types as t


class Progress:
    """Work-done progress for a request that carries a ``workDoneToken``: begin at the first
    engine step, a report per step (tokens so far), end when the request ends however it ends."""

    def __init__(self, ls: Any, token: t.ProgressToken | None, method: str) -> None:
        self.ls, self.token, self.method, self.begun = ls, token, method, False

    def step(self, stats: Any) -> None:
        if self.token is None:
            return
        if not self.begun:
            self.begun = True
            self.ls.work_done_progress.begin(
                self.token,
                t.WorkDoneProgressBegin(title="specdec", message=f"completing ({self.method})", cancellable=False),
            )
        self.ls.work_done_progress.report(self.token, t.WorkDoneProgressReport(message=f"{stats.emitted} tokens"))

    def end(self) -> None:
        if self.token is not None and self.begun:
            self.ls.work_done_progress.end(self.token, t.WorkDoneProgressEnd())
            self.ls.work_done_progress.tokens.pop(self.token, None)
