"""specdec/bench/merge.py: slices of a bench run merge into the figures one run over all the prompts
would report (sums, aggregate tokens/s, every speedup, tau and alpha from their counts)."""

from __future__ import annotations

import json

import pytest

from specdec.bench import merge as BM


def _row(tokens, seconds, identical, n, tau=None, alpha=None, k_mean=None, plain=0):
    d = {
        "tokens_per_s": tokens / seconds,
        "tokens_per_s_median": 1.0,
        "speedup": None,
        "speedup_median": 1.0,
        "identical": identical,
        "n_prompts": n,
        "total_tokens": tokens,
        "total_s": seconds,
    }
    if tau is not None:
        d.update(tau=tau, alpha=alpha, k_mean=k_mean, auto_plain_steps=plain, target_ms=10.0, c=0.1)
        d.update(alpha_per_position=[0.5])
    return d


def _result(none, draft, greedy, offset, n):
    return {
        "config": {
            "n_prompts": n,
            "offset": offset,
            "max_new_tokens": 128,
            "machine": {"torch_threads": 1},
            "calibration": {"choices": {"threads": 1}},
        },
        "methods": {"none": none, "draft": draft},
        "hf": {"hf_greedy": greedy},
        "fastest_plain": {},
    }


def test_slices_merge_into_the_whole_runs_figures(tmp_path) -> None:
    # slice 1: 2 prompts; none 200 tokens in 2 s; draft 200 tokens in 100 steps (tau 2), 150
    # drafted, 100 accepted; slice 2: 1 prompt; draft 100 tokens in 25 steps (tau 4), 100 drafted, 75 accepted
    a = _result(
        _row(200, 2.0, 2, 2, 1.0, None, 0.0), _row(200, 1.0, 2, 2, 2.0, 100 / 150, 1.5, 3), _row(200, 2.5, 2, 2), 0, 2
    )
    b = _result(
        _row(100, 1.0, 1, 1, 1.0, None, 0.0), _row(100, 0.5, 1, 1, 4.0, 0.75, 4.0, 1), _row(100, 1.5, 0, 1), 2, 1
    )
    m = BM.merge([a, b])
    none, draft, greedy = m["methods"]["none"], m["methods"]["draft"], m["hf"]["hf_greedy"]
    assert m["config"]["n_prompts"] == 3 and [s["offset"] for s in m["config"]["slices"]] == [0, 2]
    assert none["tokens_per_s"] == pytest.approx(100.0) and greedy["tokens_per_s"] == pytest.approx(75.0)
    assert draft["tokens_per_s"] == pytest.approx(200.0) and draft["speedup"] == pytest.approx(2.0)
    assert m["fastest_plain"] == {"name": "none", "tokens_per_s": pytest.approx(100.0)}
    assert greedy["speedup_vs_fastest_plain"] == pytest.approx(0.75) and greedy["identical"] == 2
    assert draft["tau"] == pytest.approx(300 / 125) and draft["k_mean"] == pytest.approx(250 / 125)
    assert draft["alpha"] == pytest.approx(175 / 250) and draft["auto_plain_steps"] == 4
    assert draft["tokens_per_s_median"] is None and "alpha_per_position" not in draft
    for i, r in enumerate((a, b)):
        (tmp_path / f"{i}.json").write_text(json.dumps(r))
    assert BM.main([str(tmp_path / "m.json"), str(tmp_path / "0.json"), str(tmp_path / "1.json")]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["methods"]["draft"]["tau"] == pytest.approx(2.4)


def test_runs_with_other_rows_are_refused() -> None:
    a = _result(_row(1, 1.0, 1, 1, 1.0, None, 0.0), _row(1, 1.0, 1, 1, 1.0, 0.5, 1.0), _row(1, 1.0, 1, 1), 0, 1)
    b = dict(a, hf={})
    with pytest.raises(ValueError, match="different rows"):
        BM.merge([a, b])
    with pytest.raises(ValueError, match="nothing"):
        BM.merge([])


def _grid(levels: list[int], local: float) -> dict:
    rows = [{"row": "local", "method": "none", "c": 1, "tok_s": local, "identical": True}]
    cell = {"identical": True, "ttft_p50_ms": 1.0, "ttft_p95_ms": 2.0, "req_tok_s_p50": 1.0}
    rows += [{"row": "batch", "method": "none", "c": c, "tok_s": 10.0 * c, **cell} for c in levels]
    return {"max_new_tokens": 8, "prompts": 2, "levels": levels, "rows": rows}


def test_one_merge_command_serves_concurrency_grids_too(tmp_path):
    """``python -m specdec.bench.merge`` merges ``--concurrency`` grids split by levels (the first
    slice's local row is the baseline, every slice's local figure kept) and writes the chart."""
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "m.json"
    a.write_text(json.dumps(_grid([1], 5.0)))
    b.write_text(json.dumps(_grid([4, 8], 6.0)))
    assert BM.main([str(out), str(a), str(b)]) == 0
    m = json.loads(out.read_text())
    assert m["levels"] == [1, 4, 8] and m["local_tok_s"] == [5.0, 6.0]
    assert [(r["row"], r["c"]) for r in m["rows"]] == [("local", 1), ("batch", 1), ("batch", 4), ("batch", 8)]
    assert out.with_suffix(".svg").read_text().startswith("<svg")
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"config": {}, "methods": {}, "hf": {}}))
    with pytest.raises(SystemExit):
        BM.main([str(out), str(a), str(plain)])
