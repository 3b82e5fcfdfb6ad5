"""The method registry: every drafting method's name, description, shape, defaults and factory.

Contract: importing this module loads no torch (the CLI's ``--help`` reads it). Each ``Method``:
- ``name`` and ``description`` (one line, shown by the CLI, the demo, the WebSocket ``hello`` and
  the language server's errors);
- ``drafts``: "nothing", "chain" or "tree"; ``deterministic``: whether q is a point mass;
- ``auto_k``: what ``k = "auto"`` caps a draft at (an int), or None for the method's own trained
  budget (Medusa's tree, EAGLE's node budget); ``adaptive``: whether auto picks k at run time
  below that cap (the draft model, prompt lookup) rather than using it as is; ``k_means`` says
  what an explicit k limits;
- ``build``: the factory (or ``"module:function"`` naming one in ``specdec/proposers/factories.py``);
  ``make(res)`` calls it: the proposer for an engine's loaded ``Resources``, or None when what the method
  needs is not there (no draft model, no heads folder), in which case the engine does not offer it;
- ``batch``: the batch form's factory, named the same way, or None (a proposer without per-request
  state, shared by every row: rows then call its ``propose(ctx)``); ``make_batch(proposer, slots,
  capacity)`` calls it: the method's one proposal, a ``BatchProposer`` (``core/proposer.py``):
  ``new_state()`` (one request's state: a batch row holds one, recycled when rows end),
  ``propose(states, contexts)`` (one
  ``Draft`` per state; the solo proposer's ``propose(ctx)`` is its batch of one, on the solo
  request's ``state``), ``release(state)`` (the row of ``state`` ended), ``nbytes()``,
  ``catch_up_ms`` and optionally ``one_by_one`` (``OneByOne``; True: nothing shared, the batch
  proposes and times each row apart) (serving/batch/propose.py, serving/batch/rows.py).
``k_max(method, k)`` is the one rule turning a request's k into the proposer's cap.
``preferred(available, order)`` picks a front end's default from what an engine offers:
``GENERATE_ORDER`` for generation (the draft model, whose fates teach the most; then the heads,
then prompt lookup, which needs nothing trained: a model with no draft still speculates), ``COMPLETE_ORDER``
for editor completion (prompt lookup: the fastest on code in docs/bench.md, and no second model).
Adding a method is one entry here plus its proposer (and, for per-request state or to batch its
model across rows, its batch form).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal


@dataclass(frozen=True)
class Resources:
    """What an engine loaded, for the factories: the target model, the draft model (or None), the
    folder where head folders (medusa/, eagle/) may be (or None), the shared vocabulary size, and
    the target's LM head wrapper (``Target.head``)."""

    target_model: Any
    draft_model: Any = None
    heads_dir: Path | None = None
    vocab: int | None = None
    lm_head: Any = None  # the target's LM head as Target.head hands it (EAGLE reads the same copy)


def _factory(build: Callable[..., Any] | str) -> Callable[..., Any]:
    if isinstance(build, str):
        module, _, name = build.partition(":")
        return getattr(importlib.import_module(module), name)
    return build


@dataclass(frozen=True)
class Method:
    name: str
    description: str
    drafts: Literal["nothing", "chain", "tree"]
    deterministic: bool
    auto_k: int | None
    k_means: str
    build: Callable[[Resources], Any] | str  # a factory, or "module:function" naming one
    adaptive: bool = False  # k = "auto" is chosen at run time from measurements
    batch: Callable[..., Any] | str | None = None  # the batch form's factory (or its name), or None

    def make(self, res: Resources) -> Any:
        """The proposer for ``res``, or None when what the method needs was not loaded. A factory
        named by a string is imported here, when an engine is built: the registry stays data, so
        this layer imports no proposer (tests/test_structure.py)."""
        return _factory(self.build)(res)

    def make_batch(self, proposer: Any, slots: int, capacity: int) -> Any:
        """The batch form over ``proposer``'s weights for ``slots`` rows, or None (none here)."""
        return _factory(self.batch)(proposer, slots, capacity) if self.batch is not None else None

    @property
    def tree(self) -> bool:
        return self.drafts == "tree"

    def info(self) -> dict[str, Any]:
        """JSON-ready description (the WebSocket hello, the demo's method list)."""
        return {
            "name": self.name,
            "description": self.description,
            "drafts": self.drafts,
            "deterministic": self.deterministic,
            "auto_k": self.auto_k,
            "k_means": self.k_means,
        }


TOKENS = "draft tokens per step"
NODES = "most tree nodes per step"
DRAFT_AUTO_K = 8  # auto k adapts the draft model's length up to this
LOOKUP_AUTO_K = 8  # auto k adapts lookup's length up to this (proposers/lookup_k.py)
SUFFIX_AUTO_K = 16  # the most nodes of a suffix tree; its size follows the match length (proposers/suffix.py)
METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            name="none",
            description="plain decoding: the baseline, through the same loop with an empty draft",
            drafts="nothing",
            deterministic=True,
            auto_k=None,
            k_means="(ignored)",
            build="specdec.proposers.factories:none",
        ),
        Method(
            name="draft",
            description="a small draft model samples k tokens; exact rejection sampling with its q",
            drafts="chain",
            deterministic=False,
            auto_k=DRAFT_AUTO_K,
            k_means=f"{TOKENS} (auto: adaptive, up to {DRAFT_AUTO_K})",
            build="specdec.proposers.factories:draft",
            adaptive=True,
            batch="specdec.proposers.factories:batch_draft",
        ),
        Method(
            name="lookup",
            description="prompt lookup: copy what followed the last n-gram in the context, no model",
            drafts="chain",
            deterministic=True,
            auto_k=LOOKUP_AUTO_K,
            k_means=f"{TOKENS} (auto: adaptive, up to {LOOKUP_AUTO_K})",
            build="specdec.proposers.factories:lookup",
            adaptive=True,
            batch="specdec.proposers.factories:batch_lookup",
        ),
        Method(
            name="suffix",
            description="suffix decoding: a frequency-scored tree from a cache of earlier requests' text",
            drafts="tree",
            deterministic=True,
            auto_k=SUFFIX_AUTO_K,
            k_means=f"{NODES} (auto: up to {SUFFIX_AUTO_K}, 2 per matched token)",
            build="specdec.proposers.factories:suffix",
            batch="specdec.proposers.factories:batch_suffix",
        ),
        Method(
            name="medusa",
            description="Medusa heads on the target's hidden state fill a fixed candidate tree",
            drafts="tree",
            deterministic=True,
            auto_k=None,
            k_means=f"{NODES} (auto: the trained tree)",
            build="specdec.proposers.factories:medusa",
            batch="specdec.proposers.factories:batch_medusa",
        ),
        Method(
            name="eagle",
            description="EAGLE: one trained layer drafts the target's next feature; a dynamic tree",
            drafts="tree",
            deterministic=True,
            auto_k=None,
            k_means=f"{NODES} (auto: the trained budget)",
            build="specdec.proposers.factories:eagle",
            batch="specdec.proposers.factories:batch_eagle",
        ),
    )
}
NAMES: tuple[str, ...] = tuple(METHODS)
GENERATE_ORDER = ("draft", "eagle", "medusa", "lookup", "none")
COMPLETE_ORDER = ("lookup", "none")


def k_max(method: str, k: int | str) -> int | None:
    """The proposer's cap for a request: an explicit k, else the method's ``auto_k``."""
    return METHODS[method].auto_k if k == "auto" else int(k)


def preferred(available: tuple[str, ...] | list[str], order: tuple[str, ...]) -> str:
    for name in order:
        if name in available:
            return name
    return available[0] if available else order[-1]


def describe(available: tuple[str, ...] | list[str] | None = None) -> str:
    """One line per method, for ``--help`` texts and error messages."""
    names = NAMES if available is None else [n for n in NAMES if n in available]
    return "\n".join(f"  {n:<7} {METHODS[n].description}" for n in names)
