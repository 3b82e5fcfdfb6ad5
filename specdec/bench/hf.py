"""Hugging Face's own decoding, for the benchmark's reference rows (``specdec bench --compare-hf``).

Contract: ``hf_runners(engine, assistant_tokens, lookup_tokens)`` returns ``{name: (run, settings)}``
where ``run(ids, max_new_tokens) -> list[int]`` calls ``target.generate`` on the engine's own model
objects at temperature 0 and returns the generated ids only (prompt stripped, cut after the first
EOS, as our engine reports them), and ``settings`` is a JSON-ready record of what was passed:
- ``hf_greedy``   ``generate(do_sample=False)``: the plain transformers baseline, must equal `none`
- ``hf_assisted`` ``generate(assistant_model=draft, do_sample=False)`` (only with a draft model)
- ``hf_lookup``   ``generate(prompt_lookup_num_tokens=L, do_sample=False)``
Transformers 5.x takes the assisted-generation knobs (num_assistant_tokens, its schedule, the
assistant_confidence_threshold) from the ASSISTANT's generation_config, not from generate()'s
keyword arguments; ``run`` sets them there for the duration of the call and restores the original
afterwards, so the draft model is left exactly as the engine loaded it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from transformers.utils import logging as hf_logging

ASSISTED_KEYS = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")


def _effective_assisted(draft_model, overrides: dict) -> dict:
    """The assisted settings transformers will use: the draft's generation_config, its defaults
    filled in the way AssistedCandidateGenerator fills them, then our overrides."""
    cfg = copy.deepcopy(draft_model.generation_config)
    defaults = cfg._get_default_generation_params() if hasattr(cfg, "_get_default_generation_params") else {}
    out = {}
    for key in ASSISTED_KEYS:
        value = getattr(cfg, key, None)
        out[key] = defaults.get(key) if value is None else value
    out.update(overrides)
    return out


def _cut(new_ids: list[int], eos_ids: set[int]) -> list[int]:
    for i, t in enumerate(new_ids):
        if t in eos_ids:
            return new_ids[: i + 1]
    return new_ids


def hf_generate(engine) -> Callable[..., list[int]]:
    """``generate(ids, max_new_tokens, **kw)``: transformers' greedy ``generate`` on the engine's
    target (extra ``kw`` go to it: an assistant, prompt lookup, a compile config), the new tokens
    up to and with the first EOS, capped at the engine's context as our engine is."""
    target = engine.target.model
    eos = sorted(engine.eos_ids)
    pad = eos[0] if eos else None
    device = engine.target.device

    def generate(ids: list[int], max_new_tokens: int, **kw) -> list[int]:
        x = torch.tensor([ids], dtype=torch.long, device=device)
        room = min(max_new_tokens, engine.context - len(ids))  # our engine stops at the context too
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # transformers' own deprecation notices about its internal calls
        try:
            with torch.inference_mode():
                out = target.generate(
                    input_ids=x,
                    attention_mask=torch.ones_like(x),
                    do_sample=False,
                    max_new_tokens=room,
                    pad_token_id=pad,
                    **kw,
                )
        finally:
            hf_logging.set_verbosity(verbosity)
        return _cut([int(t) for t in out[0, len(ids) :]], engine.eos_ids)

    return generate


def hf_runners(
    engine, assistant_tokens: int | None = None, lookup_tokens: int = 10
) -> dict[str, tuple[Callable[[list[int], int], list[int]], dict]]:
    draft = engine.draft_model
    eos = sorted(engine.eos_ids)
    pad = eos[0] if eos else None
    generate = hf_generate(engine)
    common = {"do_sample": False, "pad_token_id": pad}
    runners = {"hf_greedy": (lambda ids, n: generate(ids, n), dict(common))}
    if draft is not None:
        overrides = (
            {}
            if assistant_tokens is None
            else {"num_assistant_tokens": assistant_tokens, "num_assistant_tokens_schedule": "constant"}
        )

        def assisted(ids: list[int], n: int) -> list[int]:
            saved = draft.generation_config
            if overrides:
                draft.generation_config = copy.deepcopy(saved)
                for key, value in overrides.items():
                    setattr(draft.generation_config, key, value)
            try:
                return generate(ids, n, assistant_model=draft)
            finally:
                draft.generation_config = saved

        settings = dict(
            common,
            assistant_model=getattr(draft, "name_or_path", None) or "draft",
            **_effective_assisted(draft, overrides),
        )
        runners["hf_assisted"] = (assisted, settings)
    runners["hf_lookup"] = (
        lambda ids, n: generate(ids, n, prompt_lookup_num_tokens=lookup_tokens),
        dict(common, prompt_lookup_num_tokens=lookup_tokens, max_matching_ngram_size=2),
    )
    return runners
