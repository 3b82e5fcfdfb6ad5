"""Tokens/s a class can trust, and the sentences where speed and tau disagree (pure functions).

Why: the whole-run tokens/s (emitted / engine time, prefill included) moved 40% between identical
runs on a shared 2-core machine, and a method with the higher tau could show the lower speed
with nothing saying why. Everything here is computed from the run's own step timings
(``StepEvent.timings_ms``: propose, score, verify, kept per step in ``render.StepRecord``).

Contract:
- ``steady_rate(t)``: the steps after the first ``SKIP`` (warm-up), cut into windows of up to 8
  steps; each window's rate is its emitted tokens / its engine time (propose + score + verify);
  ``Rate(median, low, high, windows)``, low-high the middle half (quartiles) of the windows'
  rates. Prefill is left out (paid once per prompt, and its jitter dominated short runs). None
  with fewer than 4 steady steps. ``rate_text(rate)``: "12.3 tok/s (10.9-13.1)".
- ``split(t, method)``: ``Split``, the run's median milliseconds per steady step: draft (propose),
  verify forward (score, over 1 + the mean draft size rows), check (verify); tau; the shown speed.
  ``label(method, k)`` names a run in these sentences.
- ``time_note(s)``: where a step's time goes ("tau 2.31 tokens per target forward, 12.0 ms a step
  (draft ..., verify forward of 4.2 rows ..., check ...)").
- ``speed_html(now, before)``: both as one paragraph under the live numbers.
- ``disagree_note(now, before)``: when an earlier run of this session has the lower tau but the
  higher speed (or the reverse), one sentence saying why from both runs' splits: the draft's cost
  or the verify forward's extra rows, whichever grew more.
- ``above_tau_note(speedup, base, method)``: in a race, when the speedup exceeds the method's tau,
  why: the method's step cost less than plain decoding's (measured ms of both), so each forward
  bought more than tau; "" otherwise.
"""

from __future__ import annotations

import html
import statistics
from dataclasses import dataclass

from specdec.demo.render import Transcript

SKIP = 2  # warm-up steps left out of the steady rate (first forwards allocate the cache)
WINDOW = 8


@dataclass(frozen=True)
class Rate:
    median: float
    low: float
    high: float
    windows: int


@dataclass(frozen=True)
class Split:
    method: str
    steps: int
    draft_ms: float
    forward_ms: float
    check_ms: float
    rows: float  # mean rows of the verify forward: the pending token + the draft
    tau: float
    tokens_per_s: float

    @property
    def step_ms(self) -> float:
        return self.draft_ms + self.forward_ms + self.check_ms


def _ms(rec) -> float:
    return sum(rec.timings_ms.get(k, 0.0) for k in ("propose", "score", "verify"))


def steady_rate(t: Transcript) -> Rate | None:
    steady = [s for s in t.steps[SKIP:] if _ms(s) > 0]
    if len(steady) < 4:
        return None
    size = max(1, min(WINDOW, len(steady) // 4))
    rates = []
    for i in range(0, len(steady) - size + 1, size):
        win = steady[i : i + size]
        rates.append(1000.0 * sum(s.emitted for s in win) / sum(_ms(s) for s in win))
    low, _, high = statistics.quantiles(rates, n=4, method="inclusive")
    return Rate(statistics.median(rates), low, high, len(rates))


def rate_text(rate: Rate) -> str:
    return f"{rate.median:.1f} tok/s ({rate.low:.1f}-{rate.high:.1f})"


def label(method: str, k: object) -> str:
    return method if method == "none" else f"{method} (k={k})"


def split(t: Transcript, method: str) -> Split | None:
    """Median milliseconds of each part over the steady steps (all steps when too few): a neighbour's
    burst of work on a shared machine moves a mean, hardly a median."""
    if not t.steps or t.stats is None or not t.stats.tau:
        return None
    steps = t.steps[SKIP:] if len(t.steps) >= SKIP + 4 else t.steps
    med = {k: statistics.median(s.timings_ms.get(k, 0.0) for s in steps) for k in ("propose", "score", "verify")}
    rate = steady_rate(t)
    tps = rate.median if rate else (t.stats.tokens_per_s or 0.0)
    rows = 1 + sum(s.drafted for s in t.steps) / len(t.steps)
    return Split(method, len(t.steps), med["propose"], med["score"], med["verify"], rows, t.stats.tau, tps)


def _parts(s: Split) -> str:
    if s.method == "none":
        return f"{s.step_ms:.1f} ms a step (one-row forward {s.forward_ms:.1f}, check {s.check_ms:.1f})"
    return (
        f"{s.step_ms:.1f} ms a step (draft {s.draft_ms:.1f}, verify forward of {s.rows:.1f} rows "
        f"{s.forward_ms:.1f}, check {s.check_ms:.1f})"
    )


def time_note(s: Split | None) -> str:
    if s is None or s.step_ms <= 0:
        return ""
    return f"Speed ~ tau / step time: {s.tau:.2f} tokens per target forward, {_parts(s)}, medians."


def disagree_note(now: Split | None, before: list[Split | None]) -> str:
    """The latest earlier run of another method (or k) whose tau and speed order the other way."""
    if now is None:
        return ""
    for old in reversed([b for b in before if b is not None]):
        if old.method != now.method and (now.tau - old.tau) * (now.tokens_per_s - old.tokens_per_s) < 0:
            hi, lo = (now, old) if now.tau > old.tau else (old, now)
            more_draft, more_rows = hi.draft_ms - lo.draft_ms, hi.forward_ms - lo.forward_ms
            if max(more_draft, more_rows) <= 0:
                cause = "neither: its steps were not dearer, so the gap is prefill or a busy machine"
            elif more_draft >= more_rows:
                cause = f"mostly the draft ({more_draft:+.1f} ms a step)"
            else:
                cause = f"mostly the verify forward's extra rows ({more_rows:+.1f} ms a step)"
            return (
                f"{hi.method} has the higher tau ({hi.tau:.2f} vs {lo.tau:.2f}) but the lower speed "
                f"({hi.tokens_per_s:.1f} vs {lo.tokens_per_s:.1f} tok/s): tau counts tokens per target "
                f"forward; speed also pays for each step's draft and the verify forward's extra rows. "
                f"{hi.method}: {_parts(hi)}; {lo.method}: {_parts(lo)}. The difference: {cause}."
            )
    return ""


def speed_html(now: Split | None, before: list[Split]) -> str:
    """Where this run's step time goes and, when an earlier run disagrees, why (one small paragraph)."""
    text = " ".join(x for x in (time_note(now), disagree_note(now, before)) if x)
    if not text:
        return ""
    return f'<p class="sd-speed-note" style="font-size:13px;opacity:.85;margin:6px 0 0">{html.escape(text)}</p>'


def above_tau_note(speedup: float, base: Split | None, method: Split | None) -> str:
    if base is None or method is None or speedup <= method.tau or method.step_ms <= 0:
        return ""
    head = f"Why the speedup ({speedup:.2f}x) is above tau ({method.tau:.2f} tokens per target forward): "
    steps = f"the method's {_parts(method)} against plain decoding's {_parts(base)}"
    if method.step_ms >= base.step_ms:
        return (
            f"{head}not the steps ({steps}); the rest is prefill and the time between steps, or a busy "
            "machine (see the spread)."
        )
    text = (
        f"{head}the method's step cost less than plain decoding's: {steps}, so tau x (plain step / "
        f"method step) = {method.tau:.2f} x {base.step_ms:.1f} / {method.step_ms:.1f} = "
        f"{method.tau * base.step_ms / method.step_ms:.2f}x."
    )
    if method.forward_ms < base.forward_ms:
        text += (
            f" The verify forward of {method.rows:.1f} rows ({method.forward_ms:.1f} ms) cost less than plain "
            f"decoding's one-row forward ({base.forward_ms:.1f} ms): a forward's cost is mostly reading the "
            "weights, whatever the rows, and fewer forwards grow the cache fewer times; on a shared machine "
            "part of it can be noise (see the spread)."
        )
    return text
