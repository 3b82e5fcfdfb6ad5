"""Validated, frozen request settings shared by every front end.

Contract: constructing ``SamplingParams`` or ``GenerateSpec`` with an out-of-range value raises
``ConfigError`` (a ``ValueError``) whose message names the field and the allowed range;
``from_dict`` additionally rejects unknown keys, so a typo in a JSON request is an error, not a
silent default. ``parse_k`` is the one reader of a k setting (``"auto"``, an int, or text or a
float holding one, as CLIs and forms send it), with the one bound ``K_MAX``. Method names come
from the registry (``specdec/core/methods.py``). No torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from specdec.core import methods as _registry

K_MAX = 16
K_HELP = f"'auto' or an integer in [1, {K_MAX}]"
MAX_TOP_LOGPROBS = 20  # the OpenAI API's bound on top_logprobs


class ConfigError(ValueError):
    """A setting outside its allowed range; the message says which and why."""


def _from_dict(cls, data: dict[str, Any]):
    if not isinstance(data, dict):
        raise ConfigError(f"{cls.__name__} expects an object, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"unknown {cls.__name__} field(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return cls(**data)


def _check_number(name: str, value: Any, kind: type) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
        raise ConfigError(f"{name} must be a{'n integer' if kind is int else ' number'}, got {value!r}")


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 is greedy (one-hot p and q, through the same verifier); top_k 0 and
    top_p 1 are off. The same transform is applied to p and q before verification."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        _check_number("temperature", self.temperature, float)
        _check_number("top_k", self.top_k, int)
        _check_number("top_p", self.top_p, float)
        if not 0.0 <= self.temperature <= 100.0:
            raise ConfigError(f"temperature must be in [0, 100], got {self.temperature}")
        if self.top_k < 0:
            raise ConfigError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.seed is not None:
            _check_number("seed", self.seed, int)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SamplingParams:
        return _from_dict(cls, data)


KSetting = int | Literal["auto"]


def check_ids(ids, context: int) -> list[int]:
    """A prompt's token ids as ints, or ConfigError when there are none or they leave no room."""
    ids = [int(t) for t in ids]
    if not ids:
        raise ConfigError("the prompt is empty")
    if len(ids) >= context:
        raise ConfigError(
            f"the prompt is {len(ids)} tokens; the model's context window is {context} "
            f"tokens and generation needs room for at least one more"
        )
    return ids


def parse_k(value: Any) -> KSetting:
    """``"auto"`` or an int in [1, K_MAX] from an int, an integral float or text; else ConfigError."""
    if isinstance(value, str):
        text = value.strip()
        if text == "auto":
            return "auto"
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"k must be {K_HELP}, got {value!r}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= K_MAX:
        raise ConfigError(f"k must be {K_HELP}, got {value!r}")
    return value


@dataclass(frozen=True)
class GenerateSpec:
    """What to run: ``method`` a name of the registry (specdec/core/methods.py), ``k`` draft tokens per
    step (1..K_MAX or "auto"; for the
    tree methods medusa and eagle, the most tree nodes per step, "auto" = the trained budget),
    ``max_new_tokens``, prompt-lookup n-gram bounds, the draft model's ``confidence`` (it stops
    drafting at a position where its own top probability is below this; 0 = always k tokens),
    the sampling parameters, ``heal``: text the continuation must start with (token healing,
    exact conditioning; where ``Capabilities.heal``), left out of the emitted text, and
    ``top_logprobs``: report that many most likely tokens per emitted token (``StepEvent.top_logp``);
    ``verifier_record``: carry the verifier's record (every test's p, q, u, verdict, the residual's
    top tokens) in each StepEvent, for a step-through view."""

    method: str = "draft"
    k: KSetting = "auto"
    max_new_tokens: int = 128
    ngram_max: int = 3
    ngram_min: int = 2
    confidence: float = 0.2
    sampling: SamplingParams = field(default_factory=SamplingParams)
    heal: str = ""  # text the continuation must start with, not emitted (specdec/core/healing.py)
    verifier_record: bool = False
    top_logprobs: int = 0  # per emitted token, this many most likely tokens in StepEvent.top_logp

    def __post_init__(self) -> None:
        if self.method not in _registry.METHODS:
            raise ConfigError(f"unknown method {self.method!r}; choose one of: {', '.join(_registry.METHODS)}")
        if not isinstance(self.k, (int, str)) or isinstance(self.k, bool) or parse_k(self.k) != self.k:
            raise ConfigError(f"k must be {K_HELP}, got {self.k!r}")  # "3" must be parsed by the caller
        _check_number("max_new_tokens", self.max_new_tokens, int)
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        _check_number("ngram_max", self.ngram_max, int)
        _check_number("ngram_min", self.ngram_min, int)
        if not 1 <= self.ngram_min <= self.ngram_max:
            raise ConfigError(f"need 1 <= ngram_min <= ngram_max, got {self.ngram_min}, {self.ngram_max}")
        _check_number("confidence", self.confidence, float)
        if not 0.0 <= self.confidence <= 1.0:
            raise ConfigError(f"confidence must be in [0, 1] (0 = always draft k tokens), got {self.confidence}")
        if not isinstance(self.sampling, SamplingParams):
            raise ConfigError("sampling must be a SamplingParams")
        if not isinstance(self.heal, str):
            raise ConfigError(f"heal must be text, got {type(self.heal).__name__}")
        if not isinstance(self.verifier_record, bool):
            raise ConfigError(f"verifier_record must be true or false, got {self.verifier_record!r}")
        _check_number("top_logprobs", self.top_logprobs, int)
        if not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
            raise ConfigError(f"top_logprobs must be in [0, {MAX_TOP_LOGPROBS}], got {self.top_logprobs}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerateSpec:
        data = dict(data)
        if isinstance(data.get("sampling"), dict):
            data["sampling"] = SamplingParams.from_dict(data["sampling"])
        return _from_dict(cls, data)
