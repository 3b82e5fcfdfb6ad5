"""The Backend seam (specdec/serving/backend.py) through its in-process implementation (specdec/serving/local.py), over
a fake engine (pure thread logic) and over the shipped models: queue order, busy, cancel while
queued and while running, errors, shutdown, async iteration, and exact tokens."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from specdec.core.config import ConfigError, GenerateSpec
from specdec.core.events import Piece, Stats, StepEvent
from specdec.serving.backend import Busy, Request, ShuttingDown
from specdec.serving.local import LocalBackend

SPEC = GenerateSpec(method="none", max_new_tokens=8)


class Tok:
    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]


class Slow:
    """n plain steps of ``delay`` seconds each; remembers the order requests started in."""

    methods, context, tokenizer = ("none",), 64, Tok()

    def __init__(self, n=5, delay=0.01, fail_at=None):
        self.n, self.delay, self.fail_at, self.started = n, delay, fail_at, []
        self.gate = threading.Event()
        self.gate.set()

    def proposer(self, method):
        raise ConfigError(f"method {method!r} is not available; available: none")

    def stream(self, ids, spec, corpus=(), tenant=None):
        self.started.append(ids[0])
        for i in range(1, self.n + 1):
            self.gate.wait(10)
            if i == self.fail_at:
                raise RuntimeError("boom")
            time.sleep(self.delay)
            yield StepEvent(i, (Piece(i, "x", "plain", i, 0),), Stats(), {}, 0, "length" if i == self.n else None)


def test_first_come_first_served_and_every_event_arrives():
    e = Slow(n=3)
    b = LocalBackend(e)
    handles = [b.submit(Request(c, SPEC)) for c in "abc"]
    assert [[ev.step for ev in h] for h in handles] == [[1, 2, 3]] * 3
    assert e.started == [ord("a"), ord("b"), ord("c")] and all(h.stop == "length" for h in handles)
    assert [h.seq for h in handles] == [0, 1, 2] and all(h.started() for h in handles)


def test_until_ends_a_request_on_the_model_thread_with_no_step_after_it():
    e = Slow(n=6)
    b = LocalBackend(e)
    seen = []
    h = b.submit(Request("a", SPEC), until=lambda ev: seen.append(threading.current_thread().name) or ev.step == 2)
    assert [ev.step for ev in h] == [1, 2] and h.stop == "until" and h.steps == 2  # step 3 never ran
    assert seen == ["specdec-engine"] * 2
    nxt = b.submit(Request("b", SPEC))  # the backend serves on
    assert [ev.step for ev in nxt] == list(range(1, 7)) and nxt.stop == "length"


def test_bad_requests_are_refused_at_submit():
    b = LocalBackend(Slow())
    with pytest.raises(ConfigError, match="not available"):
        b.submit(Request("a", GenerateSpec(method="draft")))
    with pytest.raises(ConfigError, match="empty"):
        b.submit(Request("", SPEC))
    with pytest.raises(ConfigError, match="context window"):
        b.submit(Request("x" * 64, SPEC))


def test_a_full_queue_is_busy_and_a_queued_cancel_never_starts():
    e = Slow(n=50)
    e.gate.clear()  # the first request holds the model thread
    b = LocalBackend(e, max_queue=1)
    run = b.submit(Request("a", SPEC))
    while run.started() is None:
        time.sleep(0.001)
    wait = b.submit(Request("b", SPEC))
    with pytest.raises(Busy):
        b.submit(Request("c", SPEC))
    wait.cancel()
    assert list(wait) == [] and wait.stop == "cancelled" and wait.started() is False
    run.cancel()
    e.gate.set()
    assert len(list(run)) <= 1 and run.stop == "cancelled" and run.steps - run.steps_at_cancel <= 1
    assert e.started == [ord("a")]


def test_errors_end_the_request_and_the_backend_keeps_serving():
    e = Slow(n=5, fail_at=3)
    b = LocalBackend(e)
    h = b.submit(Request("a", SPEC))
    with pytest.raises(RuntimeError, match="boom"):
        list(h)
    assert h.stop == "error"
    e.fail_at = None
    assert [ev.step for ev in b.submit(Request("b", SPEC))] == [1, 2, 3, 4, 5]


def test_shutdown_ends_running_and_queued_requests():
    e = Slow(n=1000, delay=0.002)
    b = LocalBackend(e)
    run, queued = b.submit(Request("a", SPEC)), b.submit(Request("b", SPEC))
    next(iter(run))
    assert b.shutdown(10)
    list(run), list(queued)
    assert run.stop == queued.stop == "shutdown" and queued.started() is False
    with pytest.raises(ShuttingDown):
        b.submit(Request("c", SPEC))


def test_async_iteration_from_an_event_loop():
    b = LocalBackend(Slow(n=4))

    async def main():
        h = b.submit(Request("a", SPEC))
        began = await h.wait_started()
        return began, [ev.step async for ev in h], h.stop

    assert asyncio.run(main()) == (True, [1, 2, 3, 4], "length")


def test_a_loader_runs_on_the_model_thread_and_its_error_reaches_the_caller():
    seen = []
    b = LocalBackend(loader=lambda: seen.append(threading.current_thread().name) or Slow())
    assert b.wait_ready(10).methods == ("none",) and seen == ["specdec-engine"]

    def broken():
        raise OSError("no such folder")

    with pytest.raises(OSError, match="no such folder"):
        LocalBackend(loader=broken).wait_ready(10)


def test_the_shipped_models_through_the_backend_are_exact(engine, backend, prompts):
    prompt = prompts[0]
    for method in engine.methods:
        spec = GenerateSpec(method=method, max_new_tokens=32)
        via = [t for ev in backend.submit(Request(prompt, spec)) for t in ev.token_ids]
        assert via == engine.generate(prompt, GenerateSpec(method="none", max_new_tokens=32)).tokens, method


def test_an_engine_decodes_one_stream_at_a_time(engine):
    from specdec.engine.session import EngineBusy

    first = engine.stream("def f(x):\n", SPEC)
    next(first)
    second = engine.stream("class A:\n", SPEC)  # supersedes the first
    assert len([ev for ev in second]) >= 1
    with pytest.raises(EngineBusy):
        next(first)


def test_another_thread_cannot_start_a_stream_while_one_runs(engine):
    from specdec.engine.session import EngineBusy

    first = engine.stream("def f(x):\n", SPEC)
    next(first)
    errors = []

    def other():
        try:
            engine.stream("class A:\n", SPEC)
        except EngineBusy as e:
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    assert errors and "another thread" in str(errors[0])
    assert list(first)[-1].stop == "length"  # the first stream is undisturbed and runs to its end
    t2 = threading.Thread(target=lambda: errors.append(len(engine.generate("x = 1\n", SPEC).tokens)))
    t2.start()
    t2.join(30)
    assert isinstance(errors[-1], int) and errors[-1] >= 1  # once it ended, any thread may decode
