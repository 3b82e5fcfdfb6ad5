"""Several prompt prefixes kept warm: switching between documents does not redo the whole prefill.

Contract: ``KeptStates(slots, min_gain)`` is the one keep-warm policy, for any model state that
is a function of the tokens it holds: it keeps up to ``slots`` put-aside states, each (token ids,
an opaque state). ``choose(ids, state, valid, tokens, fresh)`` is called before a model feeds
``tokens``, with its live ids and state (``valid``: the state holds exactly ``ids``); it returns
the (ids, state) to go on from: a kept one that shares at least ``min_gain`` more leading tokens
with ``tokens`` than the live one (the live one is put aside in its place), else a fresh empty one
(``fresh()``) when the live one would lose most of what it holds (an editor switched files: the
live one is put aside), else the live one. The least recently put aside goes first beyond
``slots``. ``drop(ids)`` drops the kept states of a document whose last prompt was ``ids``: those
sharing at least half their tokens with ``ids``, the ones a request for that prompt would swap in
(two documents that share a long head, a licence header that fills half the state, lose both,
which costs a prefill later and changes no token). The draft model keeps its caches with it too
(``proposers/draft.py``).
For the target: ``before_prefill(target, ids)`` is called just before ``Target.prefill(ids)`` and
swaps states by reference (``Target.state`` / ``restore`` / ``fresh_state``: KV cache and hidden
states), never copied; ``drop(target, ids)``, ``forget(target)`` and ``kept(target)`` (the kept
ids, for tests) act on the target's own ``KeptStates``, held in a weak map (nothing added to the
class). Prefill then reuses its longest common prefix as always, so the output is unchanged (the
same cached keys and values for the same positions), only the work differs.
Memory: a kept state of the shipped target is at most about 8 MB (6 layers x 2 x 512 positions x
320 x 4 bytes); of the shipped draft about 1 MB.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from specdec.core.seq import common_prefix

SLOTS = 4
MIN_GAIN = 32  # tokens: below this, keeping the live state is as good


class KeptStates:
    def __init__(self, slots: int = SLOTS, min_gain: int = MIN_GAIN) -> None:
        self.slots, self.min_gain = slots, min_gain
        self.kept: list[tuple[list[int], Any]] = []

    def __len__(self) -> int:
        return len(self.kept)

    def choose(
        self, ids: list[int], state: Any, valid: bool, tokens: list[int], fresh: Callable[[], Any]
    ) -> tuple[list[int], Any]:
        want = tokens[:-1]
        live = common_prefix(ids, want) if valid else 0
        best, best_n = None, live
        for kept in self.kept:
            n = common_prefix(kept[0], want)
            if n > best_n:
                best, best_n = kept, n
        if best is not None and best_n >= live + self.min_gain:
            self.kept.remove(best)
            self._put_aside(ids, state, valid)
            return best
        if valid and len(ids) >= 2 * self.min_gain and live < len(ids) // 2:
            self._put_aside(ids, state, valid)
            return [], fresh()
        return ids, state

    def _put_aside(self, ids: list[int], state: Any, valid: bool) -> None:
        if valid and ids:
            self.kept.append((list(ids), state))
        del self.kept[: -self.slots or len(self.kept)]

    def drop(self, ids: list[int]) -> int:
        mine = [k for k in self.kept if ids and 2 * common_prefix(k[0], ids) >= len(k[0])]
        for k in mine:
            self.kept.remove(k)
        return len(mine)

    def clear(self) -> None:
        self.kept.clear()


_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # target -> its KeptStates


def before_prefill(target, ids: list[int]) -> None:
    kept = _KEPT.setdefault(target, KeptStates())
    live = target.state()
    got, state = kept.choose(target.ids, live, target.valid(), ids, target.fresh_state)
    if state is not live:
        target.restore(got, state)


def forget(target) -> None:
    """Drop every kept state of ``target`` (memory back)."""
    _KEPT.pop(target, None)


def drop(target, ids: list[int]) -> int:
    """Drop the kept states of the document whose last prompt was ``ids``; how many went."""
    kept = _KEPT.get(target)
    return kept.drop(ids) if kept is not None else 0


def kept(target) -> list[list[int]]:
    """The token ids of every kept state of ``target``, least recently used first (for tests)."""
    kept = _KEPT.get(target)
    return [list(ids) for ids, _ in kept.kept] if kept is not None else []
