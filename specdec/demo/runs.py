"""Running requests for the demo: validated settings, batched streaming from a backend, per-session state.

Contract:
- ``make_spec(backend, method, k, temperature, top_p, max_new_tokens, seed)`` returns a
  ``GenerateSpec`` or raises ``ConfigError`` with a message fit for the page (ranges checked
  against this backend: its methods, its context window). A fixed k is the page's "show me" mode
  (specdec/demo/mode.py): the draft model's confidence stop is off, so it drafts k tokens a step;
  ``page=False`` (the ``/generate`` API) keeps the engine's default confidence.
- ``Run(backend, prompt, spec, stop, heal=...)`` with ``heal`` backs a typed prompt off to the last
  token boundary the model knows (``specdec.core.healing.split_prompt``: a trailing partial word,
  punctuation, or whitespace with a newline) and asks for a continuation that spells it first
  (``GenerateSpec.heal``): conditioning, the target's distribution unchanged; ``healed`` is that
  text (the events' text starts after it, so the page shows the prompt as typed).
- ``Run(backend, prompt, spec, stop).batches()`` submits one request and yields lists of the events
  that arrived since the last pull, at most one list per ``min_interval_s`` (so a slow page never
  lags behind the engine), and one empty list first if the request waits in the backend's queue.
  When the session's ``stop`` event is set (watched by a small thread of
  the run, so Stop acts at once even while the page is slow to pull) or the consumer closes
  ``batches()`` (a cancelled or disconnected request), it cancels the request: the backend ends it
  between steps (also while it still waits in the queue). A run nobody reads for ``idle_s`` seconds
  (a page that went away without closing its generator) is cancelled by the backend, so it cannot
  hold the engine. Errors are re-raised in the consumer after the events that came before them.
- ``DemoSession`` is one browser session's state (its stop event and its measured runs); gradio
  makes one per session through ``gr.State(DemoSession)``; nothing here is shared between users.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from specdec.core.config import ConfigError, GenerateSpec, SamplingParams, parse_k
from specdec.core.events import StepEvent
from specdec.demo.mode import confidence_for
from specdec.serving.backend import Request


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
    split: Any = None  # speed.Split of a Generate run: where its step time went (the tau/speed sentence)


class DemoSession:
    """One browser session: its stop event and its measured runs. A plain class, not a dataclass
    (gradio would serialise a dataclass value into the page config); ``gr.State(DemoSession())``
    deep-copies it for every new session, which gives that session a fresh event and run list."""

    def __init__(self, runs: list[RunRecord] | None = None) -> None:
        self.stop = threading.Event()
        self.runs: list[RunRecord] = list(runs or [])
        self.walk: Any = None  # the step-through view's recorded run (app/demo_step.Walk)

    def __deepcopy__(self, memo: dict) -> DemoSession:
        return DemoSession(self.runs)


def _to_int(x: Any) -> Any:
    return int(x) if isinstance(x, float) and x.is_integer() else x  # gr.Number sends floats


def make_spec(
    backend, method: str, k: Any, temperature: float, top_p: float, max_new_tokens: Any, seed: Any, page: bool = True
) -> GenerateSpec:
    if method not in backend.methods:
        raise ConfigError(f"method {method!r} is not available here; choose one of: {', '.join(backend.methods)}")
    max_new_tokens = _to_int(max_new_tokens)
    context = backend.limits.context
    if isinstance(max_new_tokens, int) and not isinstance(max_new_tokens, bool) and not 1 <= max_new_tokens <= context:
        raise ConfigError(
            f"max_new_tokens must be in [1, {context}] (the model's context window), got {max_new_tokens}"
        )
    seed = None if seed is None or seed == "" else _to_int(seed)
    sampling = SamplingParams(temperature=temperature, top_p=top_p, seed=seed)
    k = parse_k(k)
    conf = confidence_for(k) if page else GenerateSpec.confidence  # a fixed k on the page is "show me"
    return GenerateSpec(method=method, k=k, max_new_tokens=max_new_tokens, sampling=sampling, confidence=conf)


def check_prompt(prompt: Any) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise ConfigError("the prompt is empty: type some code or pick an example")
    return prompt


class Run:
    """One request through the backend, streamed in batches; see the module docstring."""

    def __init__(
        self,
        backend,
        prompt: str,
        spec: GenerateSpec,
        stop: threading.Event | None = None,
        min_interval_s: float = 0.04,
        poll_s: float = 0.05,
        idle_s: float = 30.0,
        heal: bool = False,
    ) -> None:
        self.backend, self.prompt, self.spec = backend, prompt, spec
        self.healed = ""  # the prompt's tail the model's first tokens spell (token healing), if any
        if heal and getattr(backend.capabilities, "heal", False) and not spec.heal:
            from dataclasses import replace

            from specdec.core.healing import split_prompt

            at = split_prompt(prompt)
            if at < len(prompt):
                self.prompt, self.healed = prompt[:at], prompt[at:]
                self.spec = replace(spec, heal=self.healed)
        self.stop = stop or threading.Event()
        self.min_interval_s, self.poll_s, self.idle_s = min_interval_s, poll_s, idle_s
        self.stopped_early = False

    def batches(self) -> Iterator[list[StepEvent]]:
        handle = self.backend.submit(Request(self.prompt, self.spec, idle_s=self.idle_s))
        threading.Thread(target=self._watch, args=(handle,), name="specdec-demo-stop", daemon=True).start()
        last_yield, ended, announced = 0.0, False, False
        try:
            while not ended:
                events, ended = handle.next_batch(self.poll_s)
                if not events and not announced and handle.started() is None:
                    announced = True
                    yield []  # once: the request waits in the backend's queue
                    continue
                wait = self.min_interval_s - (time.monotonic() - last_yield)
                if events and wait > 0 and not ended:
                    time.sleep(wait)  # coalesce: at most one page update per interval
                    more, ended = handle.next_batch(0)
                    events += more
                if events:
                    last_yield = time.monotonic()
                    yield events
            if handle.error is not None:
                raise handle.error
            self.stopped_early = self.stopped_early or handle.stop in ("cancelled", "shutdown", "abandoned")
        finally:
            if not handle.ended:
                handle.cancel()

    def _watch(self, handle) -> None:
        """Cancel as soon as Stop is pressed, however slowly the page pulls its updates."""
        while not handle.ended:
            if self.stop.wait(self.poll_s):
                self.stopped_early = True
                handle.cancel()
                return


def run_to_end(backend, prompt: str, spec: GenerateSpec, stop: threading.Event | None = None) -> list[StepEvent]:
    """All events of one run (used by the race)."""
    return [ev for batch in Run(backend, prompt, spec, stop, min_interval_s=0.0).batches() for ev in batch]
