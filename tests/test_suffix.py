"""The suffix method on the shipped models: exact at temperature 0 (tokens of plain decoding), a
repeated request drafts from the first one's text and accepts it, rows of a batch share the cache,
and at temperature > 0 the first token of a step whose draft is a two-sibling tree is distributed
as p (a chi-square test with teeth, as tests/test_distribution.py does for the draft model)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.core.sampling import to_probs
from specdec.proposers.suffix import SuffixDecoding
from specdec.serving.backend import Request
from tests.test_distribution import chi2_pvalue

TRIALS = int(__import__("os").environ.get("SPECDEC_TRIALS", 1500))


def _spec(method: str, n: int, temperature: float = 0.0, seed: int | None = None) -> GenerateSpec:
    return GenerateSpec(method=method, max_new_tokens=n, sampling=SamplingParams(temperature, seed=seed))


@pytest.fixture
def fresh(engine, monkeypatch):
    """A fresh suffix proposer (an empty cache) in the session's engine, for this test only."""
    prop = SuffixDecoding()
    monkeypatch.setitem(engine.proposers, "suffix", prop)
    return prop


def test_greedy_suffix_equals_plain_decoding(engine, prompts, fresh):
    for prompt in prompts[:4] + prompts[:2]:  # the repeats draft from the cache
        want = engine.generate(prompt, _spec("none", 40)).tokens
        assert engine.generate(prompt, _spec("suffix", 40)).tokens == want


def test_a_repeated_request_drafts_from_the_first_and_accepts(engine, prompts, fresh):
    a, b = prompts[5], prompts[6]
    first = engine.generate(a, _spec("suffix", 48))
    engine.generate(b, _spec("suffix", 48))  # another request in between
    again = engine.generate(a, _spec("suffix", 48))
    assert again.tokens == first.tokens == engine.generate(a, _spec("none", 48)).tokens
    # the second time, the whole output is in the cache: most of it is drafted and accepted
    assert again.stats.accepted > first.stats.accepted
    assert again.stats.accepted >= len(again.tokens) // 2
    assert again.stats.tau > first.stats.tau
    # teeth: with the cache off, the same request only has its own context to copy from
    off = SuffixDecoding(cap_mb=0)
    engine.proposers["suffix"] = off
    engine.generate(a, _spec("suffix", 48))
    alone = engine.generate(a, _spec("suffix", 48))
    assert alone.tokens == first.tokens and alone.stats.accepted < again.stats.accepted


def test_batch_rows_share_one_cache_and_stay_exact(engine, prompts, fresh):
    from specdec.serving.batch import BatchBackend

    chosen = [prompts[7], prompts[8], prompts[7], prompts[8]]
    want = [engine.generate(p, _spec("none", 32)).tokens for p in chosen]
    b = BatchBackend(engine, max_batch=2, max_queue=16, prefill_chunk=32)
    try:
        got, accepted = [], []
        for p in chosen:  # one after another: each repeat finds its first run's text
            events = list(b.submit(Request(p, _spec("suffix", 32))))
            got.append([t for ev in events for t in ev.token_ids])
            accepted.append(events[-1].stats.accepted)
    finally:
        assert b.shutdown(30)
    assert got == want
    assert accepted[2] > accepted[0] and accepted[3] > accepted[1]


def test_tenants_do_not_draft_from_each_other(engine, prompts, fresh):
    a = prompts[9]
    want = engine.generate(a, _spec("none", 40)).tokens
    list(engine.stream(a, _spec("suffix", 40), tenant="alice"))
    bob = [ev for ev in engine.stream(a, _spec("suffix", 40), tenant="bob")]
    alice = [ev for ev in engine.stream(a, _spec("suffix", 40), tenant="alice")]
    assert [t for ev in bob for t in ev.token_ids] == want == [t for ev in alice for t in ev.token_ids]
    assert alice[-1].stats.accepted > bob[-1].stats.accepted


PROMPT = "import os\nimport sys\n\n\ndef main(argv):\n    "
T = 1.0


@pytest.mark.slow
def test_a_suffix_tree_keeps_p_at_temperature_one(engine, monkeypatch):
    """Each trial: a cache holding the prompt followed once by p's most likely token a and once by
    its second b, so the draft is the tree [a, b] (two siblings, q one-hot at each); the first
    emitted token over many seeds must be distributed as p."""
    ids = engine.encode(PROMPT)
    with torch.inference_mode():
        p = to_probs(engine.target.model(input_ids=torch.tensor([ids])).logits[0, -1].float(), T).numpy()
    p = p.astype(np.float64) / p.sum()
    a, b = (int(t) for t in np.argsort(-p)[:2])
    counts, kinds, b_accepted = np.zeros_like(p), {}, 0
    for seed in range(TRIALS):
        prop = SuffixDecoding()
        for follower in (a, b):
            doc = prop.cache.open(prop.cache.namespace(None))
            prop.cache.extend(doc, ids + [follower, 0])
        monkeypatch.setitem(engine.proposers, "suffix", prop)
        ev = next(iter(engine.stream(ids, _spec("suffix", 3, T, seed))))
        drafted = [x.token_id for x in ev.pieces if x.kind != "recovered" and x.kind != "bonus"]
        assert set(drafted) <= {a, b} and prop.state.source == "cache"
        first = ev.emitted[0]
        counts[first.token_id] += 1
        kinds[first.kind] = kinds.get(first.kind, 0) + 1
        b_accepted += first.kind == "accepted" and first.token_id == b
    assert kinds.get("accepted", 0) > 50 and kinds.get("recovered", 0) > 50 and b_accepted > 20
    assert chi2_pvalue(counts, p, TRIALS) > 1e-3
    # teeth: a verifier that accepts the first sibling always emits a; one that never moves the
    # rejected sibling's mass would emit b with p(b) / 1 after a's rejection instead of its residual
    always_a = np.zeros_like(p)
    always_a[a] = TRIALS
    assert chi2_pvalue(always_a, p, TRIALS) < 1e-3


def test_serve_shares_one_capped_cache_across_connections(engine, prompts, fresh):
    """``specdec serve --suffix-cache-mb``: the flag caps the engine's one cache; a client repeating
    another client's request over the WebSocket drafts from it (batch rows), every stream exact."""
    import argparse

    from specdec.cli import serve
    from specdec.core.config import ConfigError
    from specdec.server.ws_protocol import Limits
    from tests.serve_helpers import ServerThread, check_stream, client, generate, until_done

    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    assert parser.parse_args([]).suffix_cache_mb == serve.SUFFIX_CACHE_MB
    for bad in ("-1", "nan"):
        with pytest.raises(ConfigError, match="suffix-cache-mb"):
            serve.check_args(parser.parse_args(["--suffix-cache-mb", bad]))
    serve.suffix_cache(engine, parser.parse_args(["--suffix-cache-mb", "2"]))
    assert fresh.cache.cap == 2 * 2**20 and engine.proposers["suffix"] is fresh
    prompt = prompts[11][-300:]
    want = engine.generate(prompt, _spec("none", 40)).tokens
    limits = Limits(max_message_bytes=4096, max_prompt_tokens=200, max_new_tokens=100, max_queue=8)
    done = []
    with ServerThread(engine, limits, max_batch=2) as srv:
        for i in range(2):  # two connections, one after the other
            with client(srv.url) as ws:
                generate(ws, f"r{i}", prompt, method="suffix", max_new_tokens=40)
                msgs = until_done(ws, f"r{i}")
                assert check_stream(msgs)[1] == want
                done.append(msgs[-1]["stats"])
    assert done[1]["accepted"] > done[0]["accepted"] and 0 < fresh.cache.nbytes() <= fresh.cache.cap


def test_the_benchs_cold_start_forgets_the_cache(engine, prompts, fresh):
    from specdec.bench.run import cold

    engine.generate(prompts[3], _spec("suffix", 16))
    assert fresh.cache.nodes > 0
    cold(engine)  # before every timed generation of ``specdec bench``
    assert fresh.cache.nodes == 0 and not fresh.cache.docs


def test_the_concurrency_bench_repeats_a_workload_and_reports_tau(engine, prompts, fresh):
    """``specdec bench --concurrency 2 --repeat-workload``: each prompt again after the others; the
    suffix rows draft the repeats from the cache (tau above plain's 1), every request identical."""
    from specdec.bench.concurrency import run_concurrency
    from specdec.bench.repeated import repeated
    from specdec.cli.main import main

    assert repeated(["a", "b"]) == ["a", "b", "a", "b"]
    result = run_concurrency(engine, repeated(prompts[12:15]), [2], ["none", "suffix"], 24, hf=False)
    rows = {(r["row"], r["method"]): r for r in result["rows"]}
    assert all(r["identical"] for r in result["rows"])
    assert rows[("batch", "none")]["tau"] == 1.0 and rows[("batch", "suffix")]["tau"] > 1.5
    assert main(["bench", "--repeat-workload"]) == 2  # only with --concurrency
