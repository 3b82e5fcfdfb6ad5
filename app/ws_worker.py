"""The engine worker of the WebSocket server: one thread, one fair FIFO queue, cancellation between steps.

Contract: ``Worker(engine, max_queue)`` owns the only thread that ever iterates an engine stream,
so the engine (one per process, one lock) serves requests from every connection one after
another, first come first served. ``submit(job)`` queues a job or raises ``Busy`` at once when
``max_queue`` jobs are already waiting (the running one does not count), or ``ShuttingDown``.
``cancel(job, reason)`` drops a queued job (it gets ``done`` without ``start``) or flags the
running one; the worker checks the flag before and after every engine step and then closes the
generator from its own thread, so a cancelled request runs at most one more step and its result
is never sent. ``shutdown()`` refuses new jobs, ends queued ones with stop ``shutdown`` and flags
the running one the same way. Every message for a job goes through ``job.post`` (thread-safe,
supplied by the connection), in the order start, step..., done; exactly one ``done`` per job.
"""
from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from . import ws_protocol as proto

log = logging.getLogger("specdec.serve")


class Busy(Exception):
    """The queue is full."""


class ShuttingDown(Exception):
    """The worker takes no new jobs."""


@dataclass(eq=False)
class Job:
    """One generate request on its way through the queue; ``steps`` counts engine steps computed."""

    request: proto.Generate
    post: Callable[[dict[str, Any]], None]
    enqueued: float = field(default_factory=time.perf_counter)
    cancel_reason: str | None = None
    steps: int = 0
    steps_at_cancel: int | None = None
    stop: str | None = None
    seq: int = -1  # arrival order at the worker, set by submit


class Worker:
    def __init__(self, engine, max_queue: int) -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self.engine, self.max_queue = engine, max_queue
        self._cond = threading.Condition()
        self._queue: collections.deque[Job] = collections.deque()
        self._running: Job | None = None
        self._closing = False
        self._arrivals = itertools.count()
        self.finished: collections.deque[Job] = collections.deque(maxlen=256)
        self._thread = threading.Thread(target=self._run, name="specdec-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def queued(self) -> int:
        return len(self._queue)

    def submit(self, job: Job) -> None:
        with self._cond:
            if self._closing:
                raise ShuttingDown("the server is shutting down and takes no new requests")
            if len(self._queue) >= self.max_queue:
                raise Busy(f"the queue is full ({self.max_queue} requests waiting); try again later")
            job.seq = next(self._arrivals)
            self._queue.append(job)
            self._cond.notify()

    def cancel(self, job: Job, reason: str = "cancelled") -> None:
        with self._cond:
            queued = job in self._queue
            if queued:
                self._queue.remove(job)
            elif job is self._running and job.cancel_reason is None:
                job.steps_at_cancel = job.steps
                job.cancel_reason = reason
        if queued:
            self._end_unstarted(job, reason)

    def shutdown(self) -> None:
        with self._cond:
            self._closing = True
            dropped = list(self._queue)
            self._queue.clear()
            if self._running is not None and self._running.cancel_reason is None:
                self._running.steps_at_cancel = self._running.steps
                self._running.cancel_reason = "shutdown"
            self._cond.notify_all()
        for job in dropped:
            self._end_unstarted(job, "shutdown")

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the worker thread to end (after ``shutdown``); True if it has."""
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _end_unstarted(self, job: Job, reason: str) -> None:
        job.stop = reason
        job.post(proto.done(job.request.id, reason, "", 0, None))
        self.finished.append(job)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                job = self._running = self._queue.popleft()
            try:
                self._serve(job)
            finally:
                with self._cond:
                    self._running = None
                self.finished.append(job)

    def _serve(self, job: Job) -> None:
        req = job.request
        job.post(proto.start(req, 1000 * (time.perf_counter() - job.enqueued)))
        gen = self.engine.stream(req.prompt_ids, req.spec)
        texts: list[str] = []
        tokens, stats, stop = 0, None, None
        try:
            while stop is None:
                if job.cancel_reason is not None:
                    stop = job.cancel_reason
                    break
                ev = next(gen, None)
                if ev is None:  # the engine always ends on an event with a stop; never seen
                    stop = "error"
                    break
                job.steps += 1
                if job.cancel_reason is not None:  # cancelled during this step: its result is not sent
                    stop = job.cancel_reason
                    break
                job.post(proto.step(req.id, ev))
                texts.append(ev.text)
                tokens += len(ev.token_ids)
                stats, stop = ev.stats, ev.stop
        except Exception as e:  # an engine failure ends this request, never the server
            log.exception("request %r failed", req.id)
            job.post(proto.error(req.id, "internal", f"the engine failed: {type(e).__name__}: {e}"))
            stop = "error"
        finally:
            gen.close()
        job.stop = stop
        job.post(proto.done(req.id, stop, "".join(texts), tokens, stats))
        log.info("request %r: %s, %d tokens in %d steps", req.id, stop, tokens, job.steps)
