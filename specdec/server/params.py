"""The one check of the decoding parameters the WebSocket protocol and the OpenAI routes share.

Contract (pure, no I/O): ``sampling(temperature, top_k, top_p, seed)`` returns the checked
``SamplingParams`` or raises ``ParamError(message, param)`` naming the field; ``length(value,
name, ceiling)`` checks a generation length. Both transports call these, so the same value is
refused with the same message on both (each transport adds its own envelope: a WebSocket
``bad_params`` error, an HTTP 400 whose ``param`` names the field). Ranges, as OpenAI and vLLM
check them: ``temperature`` a finite number in [0, ``MAX_TEMPERATURE``] (NaN and infinities
refused: Python's JSON parser accepts them), ``top_p`` a finite number in (0, 1], ``top_k`` an
integer >= 0 (0 = off), ``seed`` null or an integer in [0, 2**63); a length an integer in
[1, ``ceiling``] (the model's context: a longer request could never finish; the engine ends a
request at the context anyway).
Why: temperature was [0, 100] over WebSocket and [0, 2] over HTTP, and the HTTP refusal of NaN
quoted [0, 100] (issue 51).
"""

from __future__ import annotations

import math
from typing import Any

from specdec.core.config import ConfigError, SamplingParams

MAX_TEMPERATURE = 2.0  # OpenAI's and vLLM's range is [0, 2]
MAX_SEED = 2**63


class ParamError(ValueError):
    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message, self.param = message, param


def number(value: Any, name: str, low: float, high: float, low_open: bool = False) -> float:
    """``value`` as a finite number in [low, high] (``(low, high]`` with ``low_open``), else ParamError."""
    bound = f"{'(' if low_open else '['}{low:g}, {high:g}]"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParamError(f"{name} must be a number in {bound}, got {value!r}", name)
    if not math.isfinite(value) or value > high or value < low or (low_open and value == low):
        raise ParamError(f"{name} must be a number in {bound}, got {value!r}", name)
    return float(value)


def integer(value: Any, name: str, low: int, high: int | None = None) -> int:
    """``value`` as an integer in [low, high] (no upper bound when ``high`` is None), else ParamError."""
    bound = f"at least {low}" if high is None else f"in [{low}, {high}]"
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        raise ParamError(f"{name} must be an integer {bound}, got {value!r}", name)
    return value


def sampling(temperature: Any = 0.0, top_k: Any = 0, top_p: Any = 1.0, seed: Any = None) -> SamplingParams:
    t = number(temperature, "temperature", 0.0, MAX_TEMPERATURE)
    p = number(top_p, "top_p", 0.0, 1.0, low_open=True)
    k = integer(top_k, "top_k", 0)
    s = None if seed is None else integer(seed, "seed", 0, MAX_SEED - 1)
    try:
        return SamplingParams(temperature=t, top_k=k, top_p=p, seed=s)
    except ConfigError as e:  # not reached with the checks above; kept so a new engine rule names its field
        raise ParamError(str(e), str(e).split(" ", 1)[0]) from None


def length(value: Any, name: str, ceiling: int | None) -> int:
    """A generation length: an integer in [1, ``ceiling``] (the model's context; None: no ceiling)."""
    n = integer(value, name, 1)
    if ceiling is not None and n > ceiling:
        raise ParamError(f"{name} is {n}; the model's context is {ceiling} tokens, so at most {ceiling}", name)
    return n
