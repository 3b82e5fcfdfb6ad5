"""Several prompt prefixes kept warm: switching between documents does not redo the whole prefill.

Contract: ``before_prefill(target, ids)`` is called just before ``Target.prefill(ids)``. The target
keeps one KV cache; this module keeps up to ``SLOTS`` more target states (token ids, KV cache,
hidden states), swapped in by reference, never copied. If a kept state shares a longer prefix with
``ids`` than the live one (by at least ``MIN_GAIN`` tokens), the two are exchanged; if none does
and the live state would lose most of what it holds (an editor switched files), the live state is
put aside and the target starts from an empty cache. The least recently used state is dropped
beyond ``SLOTS``. ``drop(target, ids)`` drops the kept states of a document whose last prompt
was ``ids`` (an editor closed it): those sharing at least half their tokens with ``ids``, the ones a
request for that prompt would swap in; two documents that share a long head (a licence header
that fills half the state) lose both, which costs a prefill later and changes no token. Prefill
then reuses its longest common prefix as always, so the output is unchanged (the same cached
keys and values for the same positions), only the work differs.
States are per ``Target`` (a weak map, nothing added to the class). Memory: a kept state of the
shipped target is at most about 8 MB (6 layers x 2 x 512 positions x 320 x 4 bytes).
"""

from __future__ import annotations

import weakref

from specdec.core.seq import common_prefix
from specdec.models import cache as kv

SLOTS = 4
MIN_GAIN = 32  # tokens: below this, keeping the live state is as good
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _valid(state) -> bool:
    ids, cache, _ = state
    return kv.length(cache) == len(ids)


def before_prefill(target, ids: list[int]) -> None:
    kept = _KEPT.setdefault(target, [])
    want = ids[:-1]
    live = common_prefix(target.ids, want) if _valid((target.ids, target.cache, None)) else 0
    best, best_n = None, live
    for state in kept:
        n = common_prefix(state[0], want)
        if n > best_n:
            best, best_n = state, n
    if best is not None and best_n >= live + MIN_GAIN:
        kept.remove(best)
        _put_aside(target, kept)
        target.ids, target.cache, target._hidden = list(best[0]), best[1], best[2]
    elif len(target.ids) >= 2 * MIN_GAIN and live < len(target.ids) // 2:
        _put_aside(target, kept)
        target.ids, target.cache, target._hidden = [], kv.new_cache(target.n_layers, min(target.context, 1024)), None


def _put_aside(target, kept: list) -> None:
    state = (list(target.ids), target.cache, target._hidden)
    if _valid(state) and state[0]:
        kept.append(state)
    del kept[:-SLOTS]  # the least recently used go first


def forget(target) -> None:
    """Drop every kept state of ``target`` (memory back)."""
    _KEPT.pop(target, None)


def drop(target, ids: list[int]) -> int:
    """Drop the kept states of the document whose last prompt was ``ids``; how many went."""
    kept = _KEPT.get(target)
    if not kept or not ids:
        return 0
    mine = [st for st in kept if 2 * common_prefix(st[0], ids) >= len(st[0])]
    for st in mine:
        kept.remove(st)
    return len(mine)


def kept(target) -> list[list[int]]:
    """The token ids of every kept state of ``target``, least recently used first (for tests)."""
    return [list(st[0]) for st in _KEPT.get(target, [])]
