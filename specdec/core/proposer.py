"""The proposer interface: ``propose(ctx) -> Draft``, two optional catch-up hooks, ``NoDraft``, and
the batch form's contract, named: ``BatchProposer``.

Why in the algorithm layer: step 1 of the loop is this call, and the baseline (an empty draft,
invariant I2) is part of the algorithm; the proposers themselves live in ``specdec/proposers/``.

Contract: a proposer sees the committed tokens (the last one is pending, not yet in the target's
cache), this request's settings (``ctx.spec``: method, k, confidence, n-gram bounds, sampling) with
the registry's resolved cap on draft size (``ctx.k_max``: k, or the method's default for
``k = "auto"``; None = the method's own trained budget), the room left (``ctx.budget``), the
request's generator, the target's hidden states from the last step, extra token sequences
prompt lookup may copy from (``ctx.corpus``), and the request's tenant (``ctx.tenant``: a cache
shared across requests keeps each tenant's text apart; None = the default tenant). It returns a
``Draft`` of at most ``ctx.budget`` nodes whose ``q`` is exactly the distribution its tokens were
sampled from after ``to_probs`` with the same parameters (invariant I3), or None for a
deterministic draft.

Optional hooks, for a proposer with a cache of its own that must follow the committed tokens
(the draft model): ``behind(tokens) -> int`` (how many of ``tokens`` its cache would have to be
fed) and ``catch_up(tokens) -> int`` (feed them now; how many it fed). The engine calls them right
after the target's prefill (``specdec/proposers/draft_warm.py``); a proposer without them is left alone.
Neither changes what ``propose`` returns for given tokens, only when the feeding is paid. Such a
proposer may also keep its cache per document and offer ``drop_prefix(ids)`` (drop the kept cache
of a closed document whose last prompt was ``ids``; the in-process backend calls it).
A proposer with per-request state (a cache, an acceptance estimate, a run of plain steps) keeps it
apart from its weights, in a state object: it holds the solo request's (``proposer.state``), and
its method's batch form (``Method.batch``, ``core/methods.py``) gives every batch row one of its own
(``new_state()``) and drafts for many states at once (``propose(states, contexts)``); the solo
``propose(ctx)`` is that call's batch of one. A proposer without state is shared by every row.

The batch form's contract is ``BatchProposer`` (a runtime-checkable ``typing.Protocol``; each
method's one batch class implements it, tests/test_batch_forms.py checks them): ``new_state()``,
``propose(states, contexts)`` (one ``Draft`` per state), ``release(state)``, ``nbytes()`` and
``catch_up_ms``. Three optional parts are named protocols too, so callers test for them with
``isinstance`` instead of probing names: ``OneByOne`` (a form that shares nothing across rows:
the batch proposes and times each row apart), ``ChoosesPlain`` (a proposer or state whose empty
draft may be its auto k choosing a plain step, counted in ``Stats.auto_plain``) and ``Skips`` (a
state told of a step that drafted without a call: lookup's auto k times its steps).

Why settings travel in the context: one proposer object serves every request of an engine (it
holds a model), so nothing per request may be written onto it. Proposer states keep only what is a
function of the committed tokens and past timings (caches, acceptance estimates), resynchronised
by longest common prefix on every call: the engine never calls commit or rollback on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.core.tree import Draft


@dataclass(frozen=True)
class Context:
    tokens: list[int]
    spec: GenerateSpec
    budget: int
    k_max: int | None = None
    generator: torch.Generator | None = None
    hidden: torch.Tensor | None = None
    target_ms: float | None = None
    corpus: Sequence = ()
    tenant: str | None = None  # whose text a shared cache may draft from (proposers/suffix.py)

    @property
    def params(self) -> SamplingParams:
        return self.spec.sampling


class Proposer(Protocol):
    name: str

    def propose(self, ctx: Context) -> Draft: ...


class CatchesUp(Protocol):
    """The optional hooks of a proposer with a cache of its own (see the module docstring)."""

    def behind(self, tokens: list[int]) -> int: ...

    def catch_up(self, tokens: list[int]) -> int: ...


@runtime_checkable
class BatchProposer(Protocol):
    """A method's batch form (``Method.batch``, core/methods.py): the method's one proposal for
    every row of a batch step, each row holding a state of its own."""

    catch_up_ms: float  # the last call's time spent feeding a long catch-up (not a draft cost)

    def new_state(self) -> Any: ...  # one request's state; a batch row holds one, recycled when rows end

    def propose(self, states: Sequence[Any], contexts: Sequence[Context]) -> list[Draft]: ...

    def release(self, state: Any) -> None: ...  # the row of ``state`` ended

    def nbytes(self) -> int: ...  # the memory the form holds for its rows


@runtime_checkable
class OneByOne(Protocol):
    """A batch form that shares nothing across rows: proposed and timed per row when true."""

    one_by_one: bool


@runtime_checkable
class ChoosesPlain(Protocol):
    """A proposer or state whose empty draft may be its auto k choosing a plain step."""

    chose_plain: bool


@runtime_checkable
class Skips(Protocol):
    """A state told of a step that drafted nothing without a call."""

    def skip(self) -> None: ...


def one_by_one(form: Any) -> bool:
    """Whether a batch form proposes and times each row apart (``OneByOne``)."""
    return isinstance(form, OneByOne) and bool(form.one_by_one)


def plain_choice(src: Any) -> bool:
    """Whether ``src`` (a proposer or a row's state) chose a plain step this step (``ChoosesPlain``)."""
    return isinstance(src, ChoosesPlain) and bool(src.chose_plain)


class NoDraft:
    """The baseline: an empty draft makes every step a plain decoding step (invariant I2)."""

    name = "none"

    def propose(self, ctx: Context) -> Draft:
        return Draft.empty()
