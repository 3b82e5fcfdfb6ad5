"""``BatchBackend``: the ``Backend`` protocol (``specdec/serving/backend.py``) over a continuous batch.

Contract: ``BatchBackend(engine, max_batch, max_queue, kv_tokens, prefill_chunk)`` (or
``loader=fn`` as ``LocalBackend``). One model thread runs this loop until shutdown:
1. admit: while a slot is free, the oldest queued request becomes a row in the next free slot
   (running rows always occupy slots 0..n-1); the rest wait in the bounded FIFO queue (``Busy``
   when ``max_queue`` already wait);
2. drop: rows cancelled (``cancel``, shutdown, abandoned) end now, their slot is freed and the last
   row moves into it: a cancel removes a row within one step, and the step in flight when it came
   is not delivered;
3. prefill: rows still prefilling share a budget of ``prefill_chunk`` prompt tokens per
   iteration, oldest request first, so the oldest newcomer gets its first token soonest and a
   long prompt stalls running rows by one chunk per step. With ``fold_prefill`` (default) and the
   lean forward, the chunks ride in the running rows' scoring forward (``BatchTarget.step``: one
   pass over the weights) and a row whose prefill completes steps in the next iteration; else
   (or with no running row) they go in a forward of their own and a completed row steps at once;
4. step: every prefilled row proposes with its own method and settings, ONE target forward scores
   all rows (``BatchTarget.score``), each row verifies and commits its own path and gets its event
   (``BatchStepEvent``, with the batch size); rows that stopped end and free their slot.
A failure in a row's proposer ends that row with "error"; a failure of the shared forward ends
every row in it with "error"; the thread survives both. ``finished`` keeps the last 256 records.
``stats()`` reports slots in use, queue length, KV bytes (for leak tests and a UI), the target's
forward and the thread plan.
``adaptive=True`` calibrates the target's cost per (rows, tokens) at start and lets
``adapt.LoadPolicy`` cap the draft of every ``k = "auto"`` draft / lookup row each step (0 = plain
step) to maximise the batch's estimated tokens/s; the cap is in each event's ``batch["k"]``.
``threads="auto"`` learns from the forwards it runs how many threads a forward of its rows and
tokens should run on (``threads.ThreadPlan.learn``; a batch of one keeps the engine's calibrated count) and sets
them before each forward, back to the calibrated count when idle; an int fixes one count; None
leaves them. An idle model thread releases its OpenMP workers (``specdec/fast/omp.py``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import torch

from specdec.fast import omp
from specdec.fast.threads import ThreadPlan, time_rows
from specdec.models.batch_target import BatchTarget
from specdec.serving.backend import Capabilities, Handle, Limits
from specdec.serving.batch.adapt import LoadPolicy
from specdec.serving.batch.memory import plan_slots
from specdec.serving.batch.propose import Proposers
from specdec.serving.batch.rows import Row, States
from specdec.serving.batch.steps import Steps
from specdec.serving.queue_front import QueueFront

log = logging.getLogger("specdec.batch")


class BatchBackend(Steps, QueueFront):
    capabilities = Capabilities(heal=True)

    def __init__(
        self,
        engine: Any = None,
        max_batch: int = 8,
        max_queue: int = 64,
        kv_tokens: int | None = None,
        prefill_chunk: int = 256,
        loader: Callable[[], Any] | None = None,
        name: str = "specdec-batch",
        adaptive: bool = False,
        threads: int | str | None = "auto",
        fold_prefill: bool = True,
    ) -> None:
        if max_batch < 1 or prefill_chunk < 1:
            raise ValueError("max_batch and prefill_chunk must be >= 1")
        super().__init__(engine, max_queue, loader)
        self.max_batch, self.kv_tokens, self.prefill_chunk = max_batch, kv_tokens, prefill_chunk
        self._target = None
        self.rows: list[Row] = []
        self.steps = 0
        self.policy = LoadPolicy() if adaptive else None
        self.threads, self._threads_arg = None, threads
        self.fold_prefill = fold_prefill
        if engine is not None:
            self._setup(engine)
        self._thread = threading.Thread(target=self._main, args=(loader,), name=name, daemon=True)
        self._thread.start()

    def _setup(self, engine: Any) -> None:
        self.slots, self.capacity = plan_slots(engine.target.model, engine.context, self.max_batch, self.kv_tokens)
        t = engine.target
        self._target = BatchTarget(t.model, self.slots, self.capacity, t.vocab, lean=t.lean, head=t.head)
        # the forward calibration chose for the solo path (specdec/fast/calibrate.py), native rows included
        self._target.use(t.path, t.forward.rows)
        self._proposers = Proposers(engine, self.slots, self.capacity)
        self._states = States(self._proposers.batched)  # each row's proposer state, from its method's form
        self._loaded.set()

    # -- what the engine offers (the rest is QueueFront's) -----------------------------------------
    @property
    def limits(self) -> Limits:
        return Limits(context=self.engine.context, max_queue=self.max_queue, max_batch=self.slots)

    @property
    def idle(self) -> bool:
        with self._cond:
            return not self.rows and not self._queue

    def stats(self) -> dict:
        with self._cond:
            rows, queued = len(self.rows), len(self._queue)
        return {
            "rows": rows,
            "queued": queued,
            "slots": self.slots,
            "kv_bytes": self._target.nbytes() + self._proposers.nbytes(),
            "target_path": self._target.path,
            "threads": None if self.threads is None else dict(self.threads.table),
        }

    # -- requests (submit and cancel: QueueFront) ----------------------------------------------------
    def _cancel_running(self, handle: Handle, reason: str) -> None:
        if any(r.handle is handle for r in self.rows):
            handle.steps_at_cancel, handle.cancel_reason = handle.steps, reason

    def _running(self) -> list[Handle]:
        return [row.handle for row in self.rows]

    # -- the model thread ---------------------------------------------------------------------------
    def _main(self, loader: Callable[[], Any] | None) -> None:
        if loader is not None and not self._load(loader, self._setup):
            return
        self._plan_threads()
        if self.policy is not None:
            self.policy.calibrate(lambda rows, q: time_rows(self._target, rows, q), self.slots)
        while True:
            with self._cond:
                if not self._queue and not self.rows:
                    if self.threads is not None:
                        self.threads.apply(1)  # idle: the calibrated count, for whoever runs next
                    omp.release_pool()  # idle: our OpenMP workers must not crowd another thread's team
                while not self._queue and not self.rows and not self._closing:
                    self._cond.wait()
                if self._closing and not self._queue and not self.rows:
                    return
                self._admit()
            try:
                self._iteration()
            except BaseException as e:  # noqa: BLE001 - the model thread must outlive any request
                log.exception("batch step failed")
                for row in list(self.rows):
                    self._end(row, "error", e)

    def _plan_threads(self) -> None:
        arg, solo = self._threads_arg, torch.get_num_threads()
        if arg == "auto":
            self.threads = ThreadPlan.learn(solo)
        elif arg is not None:
            self.threads = ThreadPlan({2: int(arg)}, solo)

    def _admit(self) -> None:
        """Under the lock: queued requests take free slots, oldest first."""
        while self._queue and len(self.rows) < self.slots:
            handle = self._queue.popleft()
            method = handle.request.spec.method
            proposer = self._engine.proposers[method]
            row = Row(handle, handle._ids, proposer, len(self.rows), self._states.take(method))
            self.rows.append(row)
            handle._begin()

    def _iteration(self) -> None:
        for row in [r for r in self.rows if r.handle.cancel_reason is not None]:
            self._end(row, row.handle.cancel_reason)
        waiting = [r for r in self.rows if not r.prefilled]
        live = [r for r in self.rows if r.prefilled]
        if waiting and live and self.fold_prefill and self._target.path == "lean":
            self._step(live, self._pick(waiting))  # the chunk rides in the running rows' forward
            return
        if waiting:
            self._prefill(*self._pick(waiting))
        live = [r for r in self.rows if r.prefilled]
        if live:
            self._step(live)

    def _end(self, row: Row, stop: str, error: BaseException | None = None) -> None:
        """End a row's request and free its slot; the last row moves into it."""
        with self._cond:
            if row not in self.rows:
                return
            last = self.rows[-1]
            self.rows.remove(row)
            if last is not row:
                self._target.move(last.slot, row.slot)
                last.slot = row.slot
                self.rows.remove(last)
                self.rows.insert(row.slot, last)
            self._target.free(len(self.rows))
        self._proposers.release(row)
        self._states.give(row.spec.method, row.state)
        if not row.handle.ended:
            row.handle._end(stop, error)
        self._forget(row.handle)
