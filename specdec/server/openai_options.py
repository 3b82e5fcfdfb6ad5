"""The OpenAI request options that shape choices rather than decoding: ``n``, ``stop``, ``echo``,
``logprobs`` / ``top_logprobs``; and the stop-string cut.

Contract (pure, no I/O, no torch): ``options(body, chat)`` checks the fields and returns ``Options``
or raises ``OptionError`` (``param`` naming the field; the transport answers a 400). Ranges: ``n`` an integer
in [1, 128] (OpenAI's); ``stop`` null, a non-empty string or a list of at most 4 non-empty strings
(OpenAI's); ``echo`` a boolean (completions only; with ``logprobs`` refused: the prompt's own
log-probabilities would need a forward this server does not run); completions' ``logprobs`` an
integer in [0, 5] (OpenAI's bound), chat's ``logprobs`` a boolean with ``top_logprobs`` in [0, 20]
(which needs ``logprobs: true``). ``seeds(seed, n)``: sample i of n runs with ``seed + i``, as vLLM
seeds parallel samples (None stays None: independent draws).
``StopCut(stops)`` cuts one choice's output as OpenAI and vLLM do: the text up to the first
occurrence of any stop string, the stop string itself excluded, then nothing more; while streaming
it holds back the longest tail that could still begin a stop string, so no chunk ever carries a
part of one. ``feed(text) -> (released, hit)``; ``flush()`` releases the held tail at the end;
``matched`` is the stop string found (vLLM's ``stop_reason``) and ``end`` where it ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class OptionError(ValueError):
    """A bad option: the message, and ``param``, the field it names (a 400 in the transport)."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def _bad(_code: str, message: str, param: str) -> OptionError:
    return OptionError(message, param)


MAX_N = 128
MAX_STOPS = 4
MAX_LOGPROBS = 5  # completions
MAX_TOP_LOGPROBS = 20  # chat


@dataclass(frozen=True)
class Options:
    n: int = 1
    stop: tuple[str, ...] = ()
    echo: bool = False
    logprobs: int | None = None  # None: off; else how many alternatives per token (0: the chosen only)


def options(body: dict, chat: bool) -> Options:
    n = _integer(body, "n", 1, 1, MAX_N)
    stop = _stops(body.get("stop"))
    echo = body.get("echo") or False
    if not isinstance(echo, bool) or (echo and chat):
        raise _bad("bad_params", "echo must be a boolean (completions only)", "echo")
    logprobs = _chat_logprobs(body) if chat else _completion_logprobs(body)
    if echo and logprobs is not None:
        raise _bad("bad_params", "echo with logprobs is not supported (the prompt's log-probabilities)", "logprobs")
    return Options(n, stop, echo, logprobs)


def seeds(seed: int | None, n: int) -> list[int | None]:
    return [None if seed is None else seed + i for i in range(n)]


def _integer(body: dict, name: str, default: int, low: int, high: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad("bad_params", f"{name} must be an integer in [{low}, {high}], got {value!r}", name)
    return value


def _stops(value: Any) -> tuple[str, ...]:
    stops = [value] if isinstance(value, str) else value if isinstance(value, list) else [] if value is None else None
    if stops is None or len(stops) > MAX_STOPS or not all(isinstance(s, str) and s for s in stops):
        raise _bad(
            "bad_params", f"stop must be null, a non-empty string or a list of at most {MAX_STOPS} of them", "stop"
        )
    return tuple(dict.fromkeys(stops))


def _completion_logprobs(body: dict) -> int | None:
    if body.get("logprobs") is None:
        return None
    return _integer(body, "logprobs", 0, 0, MAX_LOGPROBS)


def _chat_logprobs(body: dict) -> int | None:
    on = body.get("logprobs") or False
    if not isinstance(on, bool):
        raise _bad("bad_params", f"logprobs must be a boolean, got {body.get('logprobs')!r}", "logprobs")
    top = _integer(body, "top_logprobs", 0, 0, MAX_TOP_LOGPROBS)
    if top and not on:
        raise _bad("bad_params", "top_logprobs needs logprobs: true", "top_logprobs")
    return top if on else None


class StopCut:
    """One choice's output with its stop strings cut (see the module docstring)."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self.text = ""  # everything generated so far
        self.sent = 0  # characters of ``text`` released
        self.hit = False
        self.matched: str | None = None  # the stop string that ended it (vLLM's ``stop_reason``)
        self.end = 0  # where that stop string ends in ``text``

    def feed(self, text: str) -> tuple[str, bool]:
        if self.hit:
            return "", True
        start = max(0, self.sent - max((len(s) for s in self.stops), default=0))
        self.text += text
        found = [(i, s) for i, s in ((self.text.find(s, start), s) for s in self.stops) if i >= 0]
        if found:
            at, self.matched = min(found, key=lambda f: (f[0], -len(f[1])))
            self.hit, self.end = True, at + len(self.matched)
            return self._release(at), True
        return self._release(len(self.text) - self._held()), False

    def flush(self) -> str:
        return "" if self.hit else self._release(len(self.text))

    def _held(self) -> int:
        """The longest tail of the text that is a proper prefix of a stop string."""
        for size in range(min(len(self.text), max((len(s) for s in self.stops), default=1) - 1), 0, -1):
            tail = self.text[-size:]
            if any(s.startswith(tail) for s in self.stops):
                return size
        return 0

    def _release(self, upto: int) -> str:
        upto = max(upto, self.sent)
        out, self.sent = self.text[self.sent : upto], upto
        return out
