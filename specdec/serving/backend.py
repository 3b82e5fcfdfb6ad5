"""The one seam between front ends and whatever decodes: the ``Backend`` protocol and its handles.

Contract. A backend offers:
- ``methods`` (names from ``specdec/core/methods.py`` it can run), ``limits`` (``Limits``: context window,
  queue length, batch size, largest k) and ``capabilities`` (``Capabilities``: what it can report;
  a remote server never sees rejected tokens or trees, and says so here so a UI can say so too);
- ``encode(text) -> token ids``, safe to call from any thread;
- ``submit(request) -> Handle``: validates at once (``ConfigError`` for a method it does not offer,
  an empty prompt or one that leaves no room in the context; ``Busy`` when ``limits.max_queue``
  requests already wait; ``ShuttingDown``) and queues the request;
- ``cancel(handle, reason)``: a queued request ends without starting; a running one ends before
  its next step, and the step in flight when it was cancelled is not delivered;
- ``shutdown(timeout)``: no new requests; queued and running ones end with stop ``"shutdown"``;
  True once everything has stopped;
- ``await ready()``: returns once ``methods`` and ``limits`` can be read (models loaded).
A ``Handle`` is one request's stream of ``StepEvent``s, consumed by sync iteration (``for ev in
handle``) or async iteration (``async for ev in handle``), from any thread or event loop, by one
consumer. Iteration ends after the last event; if decoding failed it then raises the error. After
the end, ``handle.stop`` says why it ended: a ``StepEvent.stop`` (eos, length, context), the
reason given to ``cancel`` ("cancelled" unless the caller names another), shutdown, or error.
``handle.started()`` / ``await handle.wait_started()`` / ``handle.wait_begun(timeout)`` say whether
it began decoding (False: it ended in the queue). ``handle.cancel()`` is ``backend.cancel(handle)``.
``handle.next_batch(timeout)`` drains what has arrived (a UI that coalesces updates);
``handle.listen(loop, fn)`` delivers by callback on an event loop instead (one wake-up per step
fewer than ``async for``).

Why one seam: the demo, the WebSocket server and the language server each had a runner of their own
around an engine lock. Now a backend owns the model thread (``local.LocalBackend``); a batching
scheduler or a remote OpenAI-compatible server can implement the same protocol, and every front
end works on each. No torch is imported here.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from specdec.core.config import K_MAX, GenerateSpec
from specdec.core.events import StepEvent


class Busy(Exception):
    """The queue is full; try again later."""


class ShuttingDown(Exception):
    """The backend takes no new requests."""


@dataclass(frozen=True)
class Request:
    """One generation: the prompt (text or token ids), its settings, extra token sequences prompt
    lookup may copy from (honoured where ``capabilities.corpus``), the caller's own id,
    ``idle_s``: cancel it (stop "abandoned") when its consumer has not read for that long, and
    ``tenant``: the namespace of the shared suffix cache it reads and feeds (None: the default), and
    ``client``: who sent it (any hashable; an in-process backend starts requests round-robin across
    clients, ``fair.py``; None: one anonymous client)."""

    prompt: str | Sequence[int]
    spec: GenerateSpec
    corpus: tuple = ()
    id: Any = None
    idle_s: float | None = None
    tenant: str | None = None  # set by the server (an API key's tenant), never by the client's JSON
    client: Any = None


@dataclass(frozen=True)
class Limits:
    context: int
    max_queue: int
    max_batch: int = 1
    k_max: int = K_MAX


@dataclass(frozen=True)
class Capabilities:
    fates: bool = True  # rejected tokens, and p / q of every tested token, are reported
    trees: bool = True  # tree drafts (medusa, eagle) are decoded as trees
    corpus: bool = True  # Request.corpus reaches prompt lookup
    heal: bool = False  # GenerateSpec.heal is honoured (token healing, specdec/core/healing.py)


class Backend(Protocol):
    methods: tuple[str, ...]
    limits: Limits
    capabilities: Capabilities

    async def ready(self) -> None: ...

    def encode(self, text: str) -> list[int]: ...

    def submit(self, request: Request) -> Handle: ...

    def cancel(self, handle: Handle, reason: str = "cancelled") -> None: ...

    def shutdown(self, timeout: float | None = None) -> bool: ...


@dataclass(frozen=True)
class Record:
    """What a backend keeps of an ended request (its text and tokens are not kept)."""

    id: Any
    seq: int
    steps: int
    steps_at_cancel: int | None
    stop: str | None
    queued_s: float | None


_END = object()


@dataclass(eq=False)
class Handle:
    """One request on its way through a backend (see the module docstring). The attributes after
    ``request`` are the backend's record: ``seq`` arrival order, ``steps`` engine steps computed,
    ``steps_at_cancel`` the count when cancel arrived, ``queued_s`` the wait before decoding."""

    request: Request
    backend: Any = None
    seq: int = -1
    enqueued: float = field(default_factory=time.perf_counter)
    queued_s: float | None = None
    steps: int = 0
    steps_at_cancel: int | None = None
    cancel_reason: str | None = None
    stop: str | None = None
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self._cond = threading.Condition()
        self._items: collections.deque = collections.deque()
        self._state = "queued"  # queued -> running -> ended
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._listener: tuple[asyncio.AbstractEventLoop, Any] | None = None
        self.last_read = time.monotonic()  # the consumer's last read (a backend may cancel the abandoned)

    # -- the backend's side ---------------------------------------------------------------------
    def _change(self, item: Any = None, state: str | None = None) -> None:
        with self._cond:
            listener = self._listener
            if item is not None and listener is None:
                self._items.append(item)
            if state is not None:
                self._state = state
            self._cond.notify_all()
            waiters, self._waiters = self._waiters, []
        calls = [(loop, _wake, fut) for loop, fut in waiters]
        if listener is not None:
            self.last_read = time.monotonic()  # a listener reads everything as it comes
            loop, fn = listener
            if state == "running":
                calls.append((loop, fn, "start", None))
            if item is not None:
                calls.append((loop, fn, "end", None) if item is _END else (loop, fn, "event", item))
        for loop, fn, *args in calls:
            try:
                loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # that loop has closed: nobody is waiting any more
                pass

    def record(self) -> Record:
        return Record(self.request.id, self.seq, self.steps, self.steps_at_cancel, self.stop, self.queued_s)

    def _begin(self) -> None:
        self.queued_s = time.perf_counter() - self.enqueued
        self._change(state="running")

    def _push(self, event: StepEvent) -> None:
        self._change(item=event)

    def _end(self, stop: str, error: BaseException | None = None) -> None:
        self.stop, self.error = stop, error
        self._change(item=_END, state="ended")

    # -- the consumer's side --------------------------------------------------------------------
    @property
    def ended(self) -> bool:
        return self._state == "ended"

    def started(self) -> bool | None:
        """True once decoding began, False if it ended in the queue, None while it waits."""
        state = self._state
        if state == "queued":
            return None
        return state == "running" or self.queued_s is not None

    def cancel(self, reason: str = "cancelled") -> None:
        if self.backend is not None:
            self.backend.cancel(self, reason)

    def listen(self, loop: asyncio.AbstractEventLoop, fn) -> None:
        """Instead of iterating: have ``fn(kind, event)`` called on ``loop`` for "start" (decoding
        began), each "event" and the "end" (then read ``stop`` and ``error``), in that order. It
        saves an event-loop wake-up per step over ``async for`` (the WebSocket server uses it)."""
        with self._cond:  # scheduled under the lock, so nothing the model thread adds can overtake them
            self._listener = (loop, fn)
            began = self._state == "running" or (self._state == "ended" and self.queued_s is not None)
            calls = [("start", None)] if began else []
            calls += [("end", None) if it is _END else ("event", it) for it in self._items]
            self._items.clear()
            for kind, ev in calls:
                loop.call_soon_threadsafe(fn, kind, ev)

    def _take(self) -> Any:
        self.last_read = time.monotonic()
        item = self._items.popleft()
        if item is _END:
            self._items.appendleft(_END)  # iteration stays ended
        return item

    def _at_end(self, item: Any) -> bool:
        """True for the end marker, after which iteration stops (raising the error, if any)."""
        if item is _END and self.error is not None:
            raise self.error
        return item is _END

    def __iter__(self) -> Iterator[StepEvent]:
        while True:
            with self._cond:
                while not self._items:
                    self._cond.wait()
                item = self._take()
            if self._at_end(item):
                return
            yield item

    def next_batch(self, timeout: float | None = None) -> tuple[list[StepEvent], bool]:
        """(every event available now, whether the stream has ended after them), waiting up to
        ``timeout`` for the first. It never raises: after the end, read ``stop`` and ``error``."""
        with self._cond:
            self.last_read = time.monotonic()
            if not self._items:
                self._cond.wait(timeout)
            out = []
            while self._items and self._items[0] is not _END:
                out.append(self._items.popleft())
            return out, bool(self._items)

    def wait_begun(self, timeout: float | None = None) -> bool | None:
        """Block until the request began decoding or ended (``started()``), at most ``timeout`` s."""
        with self._cond:
            self._cond.wait_for(lambda: self._state != "queued", timeout)
        return self.started()

    async def wait_started(self) -> bool:
        await self._wait_change(lambda: self._state != "queued")
        return bool(self.started())

    async def _wait_change(self, ready) -> None:
        """Return once ``ready()`` holds (checked under the lock after every change)."""
        loop = asyncio.get_running_loop()
        while True:
            fut = loop.create_future()
            with self._cond:
                if ready():
                    return
                self._waiters.append((loop, fut))
            await fut

    def __aiter__(self) -> AsyncIterator[StepEvent]:
        return self._aiter()

    async def _aiter(self) -> AsyncIterator[StepEvent]:
        while True:
            await self._wait_change(lambda: bool(self._items))
            with self._cond:
                item = self._take()
            if self._at_end(item):
                return
            yield item


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
