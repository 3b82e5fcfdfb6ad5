"""Any model that plugs in, kept that way: tiny randomly initialised target + draft pairs of six
architectures (built offline from transformers' config classes, saved to tmp folders with the
shipped tokenizer) give transformers' greedy tokens with every method that applies, at
temperature 0, whichever path calibration could pick (each one forced in turn); bfloat16 weights
on the CPU too. Medusa and EAGLE heads are trained for the shipped target only, so they do not
apply here (read_config refuses other shapes: tested in test_heads.py)."""

from __future__ import annotations

import shutil

import pytest
import torch
import transformers as T

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.engine.session import Engine
from specdec.fast import calibrate as C
from specdec.models import packed as P
from specdec.models.loading import DEFAULT_TARGET, load_models

V = 4096  # the shipped tokenizer's vocabulary
COMMON = dict(vocab_size=V, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def _llama_like(cls, h, layers, **kw):
    return cls(
        hidden_size=h,
        intermediate_size=2 * h,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        **COMMON,
        **kw,
    )


ARCHS = {
    "llama": lambda h, n: _llama_like(T.LlamaConfig, h, n),
    "qwen2": lambda h, n: _llama_like(T.Qwen2Config, h, n),
    "mistral": lambda h, n: _llama_like(T.MistralConfig, h, n, sliding_window=None),
    "phi3": lambda h, n: _llama_like(T.Phi3Config, h, n),
    # a window of 24 that the prompt plus 40 new tokens exceeds: sliding layers must mask it
    "gemma2": lambda h, n: _llama_like(T.Gemma2Config, h, n, head_dim=h // 4, sliding_window=24),
    "gpt2": lambda h, n: T.GPT2Config(n_embd=h, n_layer=n, n_head=4, n_positions=256, **COMMON),
}
METHODS = ("none", "draft", "lookup")
PROMPT = "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\ndef fib"


def _save(cfg, folder, seed):
    torch.manual_seed(seed)
    model = T.AutoModelForCausalLM.from_config(cfg).eval()
    model.generation_config.eos_token_id = 2
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(DEFAULT_TARGET / name, folder / name)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Models this small gain nothing from a second thread, and on a busy machine OpenMP's waits
    would make the module's run many times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    out = {}
    for i, (arch, make) in enumerate(ARCHS.items()):
        root = tmp_path_factory.mktemp(arch)
        _save(make(64, 2), root / "target", 10 + i)
        _save(make(32, 1), root / "draft", 20 + i)
        out[arch] = root
    return out


def _forced(engine, packed: bool, draft: str) -> dict:
    shapes = {C.shape_key(s): [packed] * len(P.PROBE_ROWS) for s in C._shapes(engine)}
    choices = {"linear": shapes}
    if "draft" in C._parts(engine):
        choices["draft"] = draft
    return choices


def _hf_greedy(model, ids, n):
    x = torch.tensor([ids])
    with torch.inference_mode():
        out = model.generate(
            input_ids=x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n, pad_token_id=0
        )
    new = out[0, len(ids) :].tolist()
    return new[: new.index(2) + 1] if 2 in new else new


def _check(engine, target, n=40):
    ids = engine.encode(PROMPT)
    want = _hf_greedy(target, ids, n)
    spec = lambda m: GenerateSpec(method=m, max_new_tokens=n, sampling=SamplingParams(temperature=0.0))
    saved = P.get_plan()
    try:
        for packed, draft in ((False, "hf"), (True, "lean")):  # each path of each part once
            C.apply(engine, _forced(engine, packed, draft))
            for m in METHODS:
                got = engine.generate(ids, spec(m)).tokens
                assert got == want, (m, packed, draft)
    finally:
        P.clear_plan()
        P.set_plan(saved)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_every_method_gives_transformers_greedy_tokens(pairs, arch) -> None:
    tok, target, draft = load_models(pairs[arch] / "target", pairs[arch] / "draft")
    engine = Engine(tok, target, draft, heads_dir=None)
    assert set(METHODS) <= set(engine.methods)
    assert ("lean" in engine.proposers["draft"].paths) == (arch == "llama")  # lean: plain Llama only
    _check(engine, target)


def test_bfloat16_weights_on_the_cpu(pairs) -> None:
    tok, target, draft = load_models(pairs["llama"] / "target", pairs["llama"] / "draft", dtype="bfloat16")
    assert next(target.parameters()).dtype == torch.bfloat16
    engine = Engine(tok, target, draft)
    assert engine.target.packed == 0 and C._shapes(engine) == set()  # oneDNN packing is float32 only
    _check(engine, target, n=24)
