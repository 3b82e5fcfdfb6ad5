"""Running the engine for the demo: validated settings, a one-thread stream pump, per-session state.

Contract:
- ``make_spec(engine, method, k, temperature, top_p, max_new_tokens, seed)`` returns a
  ``GenerateSpec`` or raises ``ConfigError`` with a message fit for the page (ranges checked
  against this engine: its methods, its context window).
- ``StreamPump(engine, prompt, spec, stop).batches()`` consumes ``engine.stream`` in ONE worker
  thread and yields lists of the events that arrived since the last pull (so a slow page never
  lags behind the engine). It stops pulling between steps and closes the generator in that same
  worker thread when the session's ``stop`` event is set, when the consumer closes ``batches()``
  (a cancelled or disconnected request), or when nobody has pulled for ``idle_s`` seconds. The
  engine lock is therefore always released. Engine errors are re-raised in the consumer.
- ``DemoSession`` is one browser session's state (its stop event and its measured runs); gradio
  makes one per session through ``gr.State(DemoSession)``; nothing here is shared between users.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from engine.config import K_MAX, ConfigError, GenerateSpec, SamplingParams
from engine.events import StepEvent

_DONE = object()


@dataclass
class RunRecord:
    """One measured run, for the Teach view's overlay."""

    method: str
    k: str
    alpha: float | None
    tau: float | None
    tokens_per_s: float | None
    speedup: float | None = None  # only from a race (baseline measured side by side)
    c: float | None = None


class DemoSession:
    """One browser session: its stop event and its measured runs. A plain class, not a dataclass
    (gradio would serialise a dataclass value into the page config); ``gr.State(DemoSession())``
    deep-copies it for every new session, which gives that session a fresh event and run list."""

    def __init__(self, runs: list[RunRecord] | None = None) -> None:
        self.stop = threading.Event()
        self.runs: list[RunRecord] = list(runs or [])

    def __deepcopy__(self, memo: dict) -> "DemoSession":
        return DemoSession(self.runs)


def _to_k(k: Any) -> int | str:
    if isinstance(k, str):
        k = k.strip()
        if k == "auto":
            return k
        try:
            return int(k)
        except ValueError:
            raise ConfigError(f"k must be 'auto' or an integer in [1, {K_MAX}], got {k!r}") from None
    if isinstance(k, float) and k.is_integer():
        return int(k)
    return k


def _to_int(x: Any) -> Any:
    return int(x) if isinstance(x, float) and x.is_integer() else x  # gr.Number sends floats


def make_spec(engine, method: str, k: Any, temperature: float, top_p: float, max_new_tokens: Any,
              seed: Any) -> GenerateSpec:
    if method not in engine.methods:
        raise ConfigError(f"method {method!r} is not available here; choose one of: {', '.join(engine.methods)}")
    max_new_tokens = _to_int(max_new_tokens)
    if isinstance(max_new_tokens, int) and not isinstance(max_new_tokens, bool) \
            and not 1 <= max_new_tokens <= engine.context:
        raise ConfigError(f"max_new_tokens must be in [1, {engine.context}] (the model's context window), "
                          f"got {max_new_tokens}")
    seed = None if seed is None or seed == "" else _to_int(seed)
    sampling = SamplingParams(temperature=temperature, top_p=top_p, seed=seed)
    return GenerateSpec(method=method, k=_to_k(k), max_new_tokens=max_new_tokens, sampling=sampling)


def check_prompt(prompt: Any) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise ConfigError("the prompt is empty: type some code or pick an example")
    return prompt


class StreamPump:
    """engine.stream(prompt, spec) in one worker thread; see the module docstring."""

    def __init__(self, engine, prompt: str, spec: GenerateSpec, stop: threading.Event | None = None,
                 min_interval_s: float = 0.04, idle_s: float = 30.0) -> None:
        self.engine, self.prompt, self.spec = engine, prompt, spec
        self.stop = stop or threading.Event()
        self.min_interval_s, self.idle_s = min_interval_s, idle_s
        self._halt = threading.Event()
        self._queue: queue.Queue = queue.Queue()
        self._last_pull = time.monotonic()
        self.stopped_early = False

    def _halted(self) -> bool:
        return self.stop.is_set() or self._halt.is_set() or time.monotonic() - self._last_pull > self.idle_s

    def _work(self) -> None:
        gen = None
        try:
            gen = self.engine.stream(self.prompt, self.spec)
            for ev in gen:
                self._queue.put(ev)
                if ev.stop is None and self._halted():
                    self.stopped_early = True
                    break
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which re-raises it
            self._queue.put(e)
        finally:
            if gen is not None:
                gen.close()  # same thread that pulled it: releases the engine lock
            self._queue.put(_DONE)

    def batches(self) -> Iterator[list[StepEvent]]:
        worker = threading.Thread(target=self._work, name="specdec-demo-stream", daemon=True)
        worker.start()
        last_yield = 0.0
        try:
            while True:
                item = self._queue.get()
                self._last_pull = time.monotonic()
                wait = self.min_interval_s - (time.monotonic() - last_yield)
                if wait > 0 and item is not _DONE:
                    time.sleep(wait)  # coalesce: at most one page update per interval
                items = [item]
                while True:
                    try:
                        items.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                events = [x for x in items if isinstance(x, StepEvent)]
                errors = [x for x in items if isinstance(x, BaseException)]
                if events:
                    last_yield = time.monotonic()
                    yield events
                if errors:
                    raise errors[0]
                if any(x is _DONE for x in items):
                    return
        finally:
            self._halt.set()
            worker.join(timeout=10.0)


def run_to_end(engine, prompt: str, spec: GenerateSpec, stop: threading.Event | None = None) -> list[StepEvent]:
    """All events of one run, consumed in one worker thread (used by the race)."""
    pump = StreamPump(engine, prompt, spec, stop, min_interval_s=0.0)
    return [ev for batch in pump.batches() for ev in batch]
