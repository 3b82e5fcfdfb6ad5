"""The loop on the shipped models: every method at temperature 0 emits exactly the tokens of plain
greedy decoding and of transformers' generate(do_sample=False); events are consistent with the
output; sampling is seeded; stopping and cancellation leave the engine consistent."""

from __future__ import annotations

import pytest
import torch

from specdec.core.config import ConfigError, GenerateSpec, SamplingParams
from specdec.engine.session import Engine

N_PROMPTS = 20
NEW = 32


def hf_greedy(engine: Engine, ids: list[int], n: int) -> list[int]:
    x = torch.tensor([ids])
    with torch.inference_mode():
        out = engine.target.model.generate(
            x,
            attention_mask=torch.ones_like(x),
            do_sample=False,
            max_new_tokens=n,
            pad_token_id=engine.tokenizer.eos_token_id,
        )
    gen = out[0, len(ids) :].tolist()
    for i, t in enumerate(gen):  # HF pads after EOS in some settings: cut at the first EOS
        if t in engine.eos_ids:
            return gen[: i + 1]
    return gen


@pytest.mark.slow
def test_every_method_is_greedy_exact_on_shipped_prompts(engine, prompts):
    assert len(prompts) >= N_PROMPTS
    specs = [
        GenerateSpec(method="draft", k=3),
        GenerateSpec(method="draft", k="auto"),
        GenerateSpec(method="lookup", k=4),
        GenerateSpec(method="lookup", k="auto"),
    ]
    accepted = 0
    for prompt in prompts[:N_PROMPTS]:
        base = engine.generate(prompt, GenerateSpec(method="none", max_new_tokens=NEW))
        assert base.stats.tau == 1.0 and base.stats.drafted == 0
        assert base.tokens == hf_greedy(engine, engine.encode(prompt), NEW)
        for spec in specs:
            spec = GenerateSpec(method=spec.method, k=spec.k, max_new_tokens=NEW)
            out = engine.generate(prompt, spec)
            assert out.tokens == base.tokens, (spec.method, spec.k, prompt[-80:])
            accepted += out.stats.accepted
    assert accepted > 0  # the speculative paths really were exercised


@pytest.mark.slow
def test_a_draft_identical_to_the_target_accepts_everything(engine, prompts):
    twin = Engine(engine.tokenizer, engine.target.model, engine.target.model)
    out = twin.generate(prompts[0], GenerateSpec(method="draft", k=4, max_new_tokens=24, confidence=0.0))
    assert out.stats.alpha == 1.0
    assert out.stats.tau > 4.0  # k accepted + bonus per step, except where the budget cut the last step
    kinds = {pc.kind for ev in out.events for pc in ev.pieces}
    assert kinds <= {"accepted", "bonus"} and "bonus" in kinds
    assert out.tokens == engine.generate(prompts[0], GenerateSpec(method="none", max_new_tokens=24)).tokens


@pytest.mark.slow
@pytest.mark.parametrize("method", ["none", "draft", "lookup"])
def test_joined_event_text_equals_decoded_output(engine, prompts, method):
    spec = GenerateSpec(method=method, k=4, max_new_tokens=40, sampling=SamplingParams(temperature=0.9, seed=3))
    out = engine.generate(prompts[3], spec)
    assert out.text == engine.tokenizer.decode(out.tokens, skip_special_tokens=True)
    assert [t for ev in out.events for t in ev.token_ids] == out.tokens
    assert out.stats.emitted == len(out.tokens)
    for ev in out.events:
        assert len(ev.emitted) >= 1  # I4: every step emits at least one token


@pytest.mark.slow
def test_seeded_sampling_is_reproducible(engine, prompts):
    def run(seed):
        return engine.generate(
            prompts[4],
            GenerateSpec(
                method="draft", k=3, max_new_tokens=30, sampling=SamplingParams(temperature=1.0, top_p=0.95, seed=seed)
            ),
        ).tokens

    assert run(11) == run(11)
    assert run(11) != run(12)


@pytest.mark.slow
def test_length_limit_is_exact_and_closing_the_stream_is_safe(engine, prompts):
    spec = GenerateSpec(method="lookup", k=8, max_new_tokens=17)
    ref = engine.generate(prompts[5], spec)
    assert len(ref.tokens) == 17 or ref.stop == "eos"
    stream = engine.stream(prompts[5], spec)
    next(stream)
    next(stream)
    stream.close()  # a client that went away after two steps
    again = engine.generate(prompts[5], spec)
    assert again.tokens == ref.tokens


def test_bad_prompts_are_clear_errors(engine):
    with pytest.raises(ConfigError, match="empty"):
        engine.encode("")
    with pytest.raises(ConfigError, match="context window"):
        engine.encode("x = 1\n" * 2000)
    with pytest.raises(ConfigError, match="unknown method"):
        GenerateSpec(method="beam")


@pytest.mark.slow
def test_an_unsure_draft_drafts_nothing_and_output_is_unchanged(engine, prompts):
    base = engine.generate(prompts[6], GenerateSpec(method="none", max_new_tokens=20))
    never = engine.generate(prompts[6], GenerateSpec(method="draft", k=4, max_new_tokens=20, confidence=1.0))
    assert never.stats.drafted == 0 and never.tokens == base.tokens
    always = engine.generate(prompts[6], GenerateSpec(method="draft", k=4, max_new_tokens=20, confidence=0.0))
    assert always.tokens == base.tokens and always.stats.drafted >= 4 * (always.stats.steps - 1)
