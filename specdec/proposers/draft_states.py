"""The draft model's KV cache kept per document, as the target's prefix states are (``prefixes.py``).

Contract: ``KeptStates(slots, min_gain)`` holds up to ``slots`` put-aside states of one draft
runner, each (token ids, the runner's opaque state). ``choose(ids, state, valid, tokens, fresh)``
is called before the draft feeds ``tokens``, with its live ids and state (``valid``: the state
holds exactly ``ids``); it returns the (ids, state) to go on from: a kept one that shares at
least ``min_gain`` more leading tokens with ``tokens`` than the live one (the live one is put
aside in its place), else a fresh empty one (``fresh()``) when the live one would lose most of
what it holds (an editor switched files: the live one is put aside), else the live one. The
least recently put aside goes first beyond ``slots``. ``drop(ids)`` drops the kept states of a
document whose last prompt was ``ids`` (at least half their tokens shared; an editor closed it).
Why: after a switch of file the target's prefix state comes back at once, but the draft then fed
the whole window again through its own forwards (8-12 ms for 100-190 tokens here) at the first
drafting step. The draft only proposes, so which cache it continues from changes no output token
(the verifier decides); the cached keys and values are those of the same positions.
Memory: a state of the shipped draft is about 1 MB (its cache of 1024 positions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specdec.core.seq import common_prefix

SLOTS = 4
MIN_GAIN = 32  # tokens: below this, the live state is as good


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
