"""The waiting room of an in-process backend: requests start round-robin across clients.

Contract: ``FairQueue`` holds queued ``Handle``s with the part of ``collections.deque``'s interface
the backends use (``append``, ``popleft``, ``remove``, ``in``, ``len``, ``bool``, iteration in start
order, ``clear``), plus ``position(handle)`` (1 = starts next; None when not queued). The order is
start-time fair queueing with unit cost: a request of client ``c`` gets the tag ``max(V, next[c])``
(``V``: the tag of the request that started last; ``next[c]``: one past the tag of ``c``'s previous
request while ``c`` still has one queued), and the queued request with the smallest (tag, arrival)
starts next. So each client with requests waiting starts one per round: a client that queued 200
requests cannot delay another client's first request by more than one of its own, while a single
client (``Request.client`` None for everyone: the demo, the language server) is served first come
first served, as before. Not thread-safe: the backend's lock guards it.

Why not one FIFO: with one client holding the queue, every other client waited for its whole
backlog (issue 51 measured first tokens after 50 s for most of 64 clients).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from specdec.serving.backend import Handle


class FairQueue:
    def __init__(self) -> None:
        self._items: dict[Handle, tuple[int, int]] = {}  # handle -> (tag, arrival)
        self._next: dict[Any, int] = {}  # client -> the tag its next request gets (while it has one queued)
        self._waiting: dict[Any, int] = {}  # client -> how many it has queued
        self._virtual = 0  # V: the tag of the request that started last
        self._arrivals = 0

    def append(self, handle: Handle) -> None:
        client = handle.request.client
        tag = max(self._virtual, self._next.get(client, self._virtual))
        self._items[handle] = (tag, self._arrivals)
        self._arrivals += 1
        self._next[client] = tag + 1
        self._waiting[client] = self._waiting.get(client, 0) + 1

    def popleft(self) -> Handle:
        if not self._items:
            raise IndexError("pop from an empty FairQueue")
        handle = min(self._items, key=self._items.__getitem__)
        self._virtual = self._items[handle][0]
        self._take(handle)
        return handle

    def remove(self, handle: Handle) -> None:
        if handle not in self._items:
            raise ValueError("the handle is not queued")
        self._take(handle)

    def _take(self, handle: Handle) -> None:
        del self._items[handle]
        client = handle.request.client
        self._waiting[client] -= 1
        if not self._waiting[client]:  # nothing queued: its next request starts from V again
            del self._waiting[client], self._next[client]

    def position(self, handle: Handle) -> int | None:
        key = self._items.get(handle)
        return None if key is None else 1 + sum(1 for other in self._items.values() if other < key)

    def clear(self) -> None:
        self._items.clear()
        self._next.clear()
        self._waiting.clear()

    def __contains__(self, handle: object) -> bool:
        return handle in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Handle]:
        return iter(sorted(self._items, key=self._items.__getitem__))
