"""The queue front every in-process backend shares: readiness, encoding, a bounded FIFO of requests.

Contract: ``QueueFront(engine, max_queue, loader)`` (give an engine or a loader that builds it on
the model thread) holds what a front end talks to before a request reaches the model thread:
- ``wait_ready(timeout)`` / ``await ready()`` wait for the engine and re-raise a load error;
  ``engine``, ``methods``, ``queued``; ``encode(text)`` through the Rust tokenizer when there is
  one (safe beside the model thread's decoding);
- ``submit(request)`` checks the method and the prompt (``ConfigError``), then queues a ``Handle``
  under the lock (``handle.seq``: arrival order): ``ShuttingDown`` once closing, ``Busy`` when
  ``max_queue`` already wait. The queue is a ``fair.FairQueue``: requests start round-robin across
  ``Request.client``s (first come first served for one client);
- ``position(handle)`` (1 = starts next; None once started or ended) and ``estimate_s(handle)``:
  its expected wait from the mean decoding time of recent requests (None before any finished);
  ``withdraw(handle, reason)`` ends a request only if it is still queued (True), atomically, so
  a front end can refuse one that waited too long without racing its start;
- ``cancel(handle, reason)``: a queued request ends now; a running one is marked through
  ``_cancel_running(handle, reason)`` (the subclass's rows, under the lock) and ends within a step;
- ``shutdown(timeout)``: no new requests, the queued ones end now, the running ones (the subclass's
  ``_running()``) within a step; True once the subclass's model thread ``_thread`` has ended;
- ``_drain()`` (under the lock) marks closing and takes the queue; ``_forget(handle)`` drops a
  finished handle's ids and keeps its slim ``Record`` in ``finished`` (the last 256);
  ``_load(loader)`` runs on the model thread and reports whether the engine loaded.
Building one releases the building thread's OpenMP workers (``omp.release_pool``): the model
thread's team then has the CPUs to itself (specdec/fast/omp.py says what this cost before).
Subclasses (``specdec/serving/local.py``'s ``LocalBackend``, ``specdec/serving/batch/scheduler.py``'s
``BatchBackend``) own
the model thread and its loop.
Why one module: the two backends wrote this part twice, and a fix to one missed the other.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from specdec.core.config import check_ids
from specdec.fast import omp
from specdec.serving.backend import Busy, Handle, Record, Request, ShuttingDown
from specdec.serving.fair import FairQueue


class QueueFront:
    def __init__(self, engine: Any, max_queue: int, loader: Callable[[], Any] | None) -> None:
        if (engine is None) == (loader is None):
            raise ValueError("give an engine or a loader, not both")
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self.max_queue = max_queue
        self._engine, self._load_error = engine, None
        self._loaded = threading.Event()
        self._cond = threading.Condition()
        self._queue = FairQueue()
        self._service_s: float | None = None  # a running mean of recent requests' decoding time
        self._closing = False
        self._arrivals = itertools.count()
        self.finished: collections.deque[Record] = collections.deque(maxlen=256)
        omp.release_pool()  # the model thread's OpenMP team must not share the CPUs with ours (specdec/fast/omp.py)

    # -- readiness and what the engine offers --------------------------------------------------------
    def wait_ready(self, timeout: float | None = None) -> Any:
        if not self._loaded.wait(timeout):
            raise TimeoutError("the models are still loading")
        if self._load_error is not None:
            raise self._load_error
        return self._engine

    async def ready(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._loaded.wait)
        self.wait_ready(0)

    @property
    def engine(self) -> Any:
        return self.wait_ready()

    @property
    def methods(self) -> tuple[str, ...]:
        return self.engine.methods

    @property
    def queued(self) -> int:
        return len(self._queue)

    def encode(self, text: str) -> list[int]:
        tok = self.engine.tokenizer
        backend = getattr(tok, "backend_tokenizer", None)
        if backend is not None:
            return backend.encode(text, add_special_tokens=False).ids
        return tok.encode(text, add_special_tokens=False)

    def token_id(self, token: str) -> int | None:
        """The id of one vocabulary entry (a special token such as ``<|fim_prefix|>``), else None."""
        tok = self.engine.tokenizer
        got = tok.convert_tokens_to_ids(token)
        return None if got is None or got == tok.unk_token_id else int(got)

    # -- requests -----------------------------------------------------------------------------------
    def submit(self, request: Request) -> Handle:
        return self._enqueue(request)

    def _enqueue(self, request: Request, **attrs: Any) -> Handle:
        """``submit``'s body; ``attrs`` (a subclass's extensions) are set on the handle before the
        model thread can see it."""
        engine = self.engine
        if request.spec.method not in engine.methods:
            engine.proposer(request.spec.method)  # raises ConfigError naming what is available
        prompt = request.prompt
        ids = check_ids(self.encode(prompt) if isinstance(prompt, str) else prompt, engine.context)
        handle = Handle(request, self)
        handle._ids = ids
        for name, value in attrs.items():
            setattr(handle, name, value)
        with self._cond:
            if self._closing:
                raise ShuttingDown("the server is shutting down and takes no new requests")
            if len(self._queue) >= self.max_queue:
                raise Busy(f"the queue is full ({self.max_queue} requests waiting); try again later")
            handle.seq = next(self._arrivals)
            self._queue.append(handle)
            self._cond.notify()
        return handle

    def position(self, handle: Handle) -> int | None:
        with self._cond:
            return self._queue.position(handle)

    def estimate_s(self, handle: Handle) -> float | None:
        """Roughly how long until ``handle`` starts: 0 when a free row takes it, else the requests
        that must finish first times the mean decoding time of recent requests, over the rows that
        decode at once; None when unknown or not queued."""
        slots = max(1, getattr(self, "slots", 1))
        with self._cond:
            position, free = self._queue.position(handle), slots - len(self._running())
        mean = self._service_s
        if position is None or mean is None:
            return None
        return max(0, position - max(0, free)) * mean / slots

    def withdraw(self, handle: Handle, reason: str) -> bool:
        """End ``handle`` with stop ``reason`` if it is still queued (True); else leave it (False)."""
        with self._cond:
            queued = handle in self._queue
            if queued:
                self._queue.remove(handle)
        if queued:
            self._end_unstarted(handle, reason)
        return queued

    def cancel(self, handle: Handle, reason: str = "cancelled") -> None:
        with self._cond:
            queued = handle in self._queue
            if queued:
                self._queue.remove(handle)
            elif handle.cancel_reason is None:
                self._cancel_running(handle, reason)
        if queued:
            self._end_unstarted(handle, reason)

    def _cancel_running(self, handle: Handle, reason: str) -> None:
        """Under the lock: mark a running request cancelled (it ends within one step)."""
        raise NotImplementedError

    def _running(self) -> list[Handle]:
        """Under the lock: the requests on the model thread now (the subclass's rows)."""
        raise NotImplementedError

    def shutdown(self, timeout: float | None = 60.0) -> bool:
        """End everything with stop "shutdown"; True once the model thread (``_thread``) has ended."""
        with self._cond:
            dropped = self._drain()
            for handle in self._running():
                if handle.cancel_reason is None:
                    self._cancel_running(handle, "shutdown")
        for handle in dropped:
            self._end_unstarted(handle, "shutdown")
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- for the model thread -----------------------------------------------------------------------
    def _drain(self) -> list[Handle]:
        """Under the lock: no new requests from now on; the queued ones, taken out."""
        self._closing = True
        dropped = list(self._queue)
        self._queue.clear()
        self._cond.notify_all()
        return dropped

    def _end_unstarted(self, handle: Handle, reason: str) -> None:
        handle._end(reason)
        self._forget(handle)

    def _forget(self, handle: Handle) -> None:
        handle._ids = None
        self.finished.append(handle.record())
        if handle.queued_s is not None and handle.steps:  # it decoded: its time feeds the wait estimate
            took = time.perf_counter() - handle.enqueued - handle.queued_s
            self._service_s = took if self._service_s is None else 0.8 * self._service_s + 0.2 * took

    def _load(self, loader: Callable[[], Any], setup: Callable[[Any], None] | None = None) -> bool:
        """On the model thread: build the engine (and ``setup(engine)``); False after a failure,
        which ``wait_ready`` re-raises to whoever waits."""
        try:
            self._engine = loader()
            if setup is not None:
                setup(self._engine)
            return True
        except BaseException as e:  # noqa: BLE001 - re-raised to whoever waits for the engine
            self._load_error = e
            return False
        finally:
            self._loaded.set()
