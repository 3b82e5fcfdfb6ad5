"""The Race view: the baseline against a method, repeated, alternating sides, reported with its spread.

Contract:
- ``race_plan(repeats)`` is the order of the timed runs: repeat r runs (none, method) when r is even
  and (method, none) when odd, so neither side always runs first (a warm cache or a neighbour's
  burst of work on a shared machine would otherwise favour one side).
- ``speedups(tps)`` pairs the r-th runs of each side: speedup_r = tokens/s of the method / tokens/s
  of the baseline; ``summary(ups)`` gives the median and the interval [min, max] of the paired
  speedups. The race tells the two apart when that interval does not contain 1 (every paired run
  was faster, or every one slower); when it contains 1 (or there is one run) the page says it
  cannot tell instead of printing a bold speedup. How wide the interval is does not matter: 1.64x
  with runs from 1.32x to 2.14x is faster.
- Speed is the engine's own clock (``Stats.elapsed_s`` of the last step: prefill and every step,
  not the time the page took to pull the stream), so streaming both sides live costs them nothing.
- ``race_verdict(base, other, temperature)`` states whether the two runs produced the same tokens
  (compared as token ids, never strings).
- ``side_speed(runs, stopped, tokens, tps)``: a side's timing line; after Stop it says the side was
  stopped, with its finished runs and what the cut run measured (never "timing ...").
- ``check_race(method)`` refuses ``none`` against ``none`` (it would time noise against noise).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from specdec.core.config import ConfigError
from specdec.demo.wording import plural

BASE = "none"
DEFAULT_REPEATS = 3
MAX_REPEATS = 9


def check_race(method: str) -> None:
    if method == BASE:
        raise ConfigError(
            "race a speculative method against the baseline: none against none would only time noise "
            "against noise (pick draft, lookup, medusa or eagle)"
        )


def race_plan(repeats: int) -> list[tuple[int, str]]:
    """[(repeat, side)] with side "base" or "method", alternating which side runs first."""
    plan = []
    for r in range(repeats):
        sides = ("base", "method") if r % 2 == 0 else ("method", "base")
        plan += [(r, side) for side in sides]
    return plan


def speedups(base_tps: list[float], method_tps: list[float]) -> list[float]:
    return [m / b for b, m in zip(base_tps, method_tps) if b > 0]


@dataclass(frozen=True)
class Summary:
    median: float
    low: float
    high: float
    n: int

    @property
    def spread(self) -> float:
        return self.high - self.low

    @property
    def conclusive(self) -> bool:
        """At least two paired runs and their interval [low, high] does not contain 1."""
        return self.n >= 2 and not self.low <= 1.0 <= self.high

    def sentence(self) -> str:
        where = "faster" if self.low > 1 else "slower"
        head = (
            f"speedup {self.median:.2f}x (median of {self.n} paired runs, spread {self.low:.2f}x to {self.high:.2f}x)"
        )
        if self.n < 2:
            return f"{head}. One repeat has no spread: this number may be noise; raise the repeats."
        if not self.conclusive:
            return (
                f"{head}. **Warning: the spread contains 1x (some paired runs were faster, some not): "
                "this race cannot tell the two apart.** Raise the repeats or the number of tokens; "
                "the machine may be busy."
            )
        return f"**{head}**: the method is {where} than the baseline in every paired run."


def summary(ups: list[float]) -> Summary:
    if not ups:
        raise ValueError("no paired runs")
    return Summary(statistics.median(ups), min(ups), max(ups), len(ups))


def race_verdict(base: list[int], other: list[int], temperature: float) -> tuple[bool, str]:
    """(identical, sentence): compares token ids, never strings."""
    same = base == other
    if temperature == 0.0:
        if same:
            return True, (
                f"Temperature 0: the two outputs are identical, token for token ({plural(len(base), 'token')}). "
                "Speculative decoding changed the speed, not the text."
            )
        first = next((i for i, (a, b) in enumerate(zip(base, other)) if a != b), min(len(base), len(other)))
        return False, f"Temperature 0 but the outputs differ from token {first}: this would be a bug."
    if same:
        return True, "The two samples happen to be identical."
    return False, (
        "Temperature > 0: each output is an exact sample from the target's distribution, but the "
        "draft consumes random numbers, so the same seed gives a different sample."
    )


def side_speed(runs: list[float], stopped: bool = False, tokens: int | None = None, tps: float | None = None) -> str:
    """One side's timing: its finished runs' median, "timing ..." while none has finished, and after
    Stop the word "stopped" with what was measured so far."""
    done = (
        f"{statistics.median(runs):.1f} tokens/s (median of {len(runs)}: " + ", ".join(f"{x:.0f}" for x in runs) + ")"
        if runs
        else ""
    )
    if not stopped:
        return done or "timing ..."
    cut = f"; the run Stop cut had {plural(tokens, 'token')}" if tokens else ""
    cut += f" at {tps:.1f} tokens/s (not counted)" if tokens and tps else ""
    return f"stopped by you: {done or 'no finished run'}{cut}"
