"""The bench per category (specdec/bench/categories.py, table.py, merge.py): figures over each
category's prompts defined like the whole run's, each against its own fastest plain decoding;
slices merge per category; and one short real run on SmolLM2 over two categories."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from specdec.bench import merge as BM
from specdec.bench.categories import category_figures, counters
from specdec.bench.metrics import fastest_plain, throughput
from specdec.bench.table import format_categories
from specdec.core.events import Stats

CATS = ["a", "b", "a"]
NONE_TOKENS = [[1] * 10, [2] * 10, [3] * 10]


def _res(emitted, forwards, drafted, accepted):
    st = Stats(steps=forwards, target_forwards=forwards, drafted=drafted, accepted=accepted, emitted=emitted)
    st.drafted_at, st.tested_at, st.accepted_at = [drafted], [drafted], [accepted]
    return SimpleNamespace(stats=st)


def _runs(idx=(0, 1, 2)):
    """Three prompts (categories a, b, a); lookup differs from none on the third; hf_greedy is the
    fastest plain decoding (12.5 tok/s against none's 10)."""
    none = [[(NONE_TOKENS[i], 1.0, _res(10, 10, 0, 0))] for i in idx]
    lookup_all = [
        [(NONE_TOKENS[0], 0.5, _res(10, 4, 8, 6))],
        [(NONE_TOKENS[1], 1.0, _res(10, 10, 4, 0))],
        [([9] * 10, 0.25, _res(10, 2, 8, 8))],
    ]
    return {
        "none": none,
        "lookup": [lookup_all[i] for i in idx],
        "hf_greedy": [[(NONE_TOKENS[i], 0.8, None)] for i in idx],
    }


def _result(idx=(0, 1, 2)):
    """A run_bench-shaped result over the prompts ``idx``, as run_bench builds it."""
    runs, cats = _runs(idx), [CATS[i] for i in idx]
    base = [NONE_TOKENS[i] for i in idx]
    rows = {n: throughput(runs[n], runs["none"], base) for n in runs}
    for n in ("none", "lookup"):
        rows[n].update(counters(runs[n]), auto_plain_steps=0)
    methods, hf = {"none": rows["none"], "lookup": rows["lookup"]}, {"hf_greedy": rows["hf_greedy"]}
    fastest = fastest_plain(methods, hf)
    for d in rows.values():
        d["speedup_vs_fastest_plain"] = d["tokens_per_s"] / fastest["tokens_per_s"]
    per_row, fastest["categories"] = category_figures(runs, base, cats, {"none", "lookup"})
    for n, d in rows.items():
        d["categories"] = per_row[n]
    config = {"n_prompts": len(idx), "offset": idx[0], "categories": {c: cats.count(c) for c in dict.fromkeys(cats)}}
    return {"config": config, "methods": methods, "hf": hf, "fastest_plain": fastest}


def test_figures_per_category_against_each_categorys_fastest_plain() -> None:
    res = _result()
    a, b = res["methods"]["lookup"]["categories"]["a"], res["methods"]["lookup"]["categories"]["b"]
    assert list(res["methods"]["lookup"]["categories"]) == ["a", "b"]  # order of the first prompt
    assert res["fastest_plain"]["categories"] == {
        "a": {"name": "hf_greedy", "tokens_per_s": pytest.approx(12.5)},
        "b": {"name": "hf_greedy", "tokens_per_s": pytest.approx(12.5)},
    }
    assert a["n_prompts"] == 2 and a["total_tokens"] == 20 and a["total_s"] == pytest.approx(0.75)
    assert a["tokens_per_s"] == pytest.approx(20 / 0.75)
    assert a["tokens_per_s_median"] == pytest.approx((20 + 40) / 2)
    assert a["speedup"] == pytest.approx(20 / 0.75 / 10)  # against none on the same prompts
    assert a["speedup_vs_fastest_plain"] == pytest.approx(20 / 0.75 / 12.5)
    assert a["tau"] == pytest.approx(20 / 6) and a["alpha"] == pytest.approx(14 / 16)
    assert (a["tested"], a["accepted"], a["alpha_tested"]) == (16, 14, pytest.approx(14 / 16))
    assert a["identical"] == 1  # the third prompt's tokens differ from none's
    assert b["speedup_vs_fastest_plain"] == pytest.approx(0.8) and b["tau"] == 1.0 and b["alpha"] == 0.0
    none_a = res["methods"]["none"]["categories"]["a"]
    assert none_a["tau"] == 1.0 and none_a["speedup"] == 1.0 and none_a["identical"] == 2
    hf_a = res["hf"]["hf_greedy"]["categories"]["a"]
    assert "tau" not in hf_a and hf_a["speedup_vs_fastest_plain"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="2 categories for 3 prompts"):
        category_figures(_runs(), NONE_TOKENS, CATS[:2], {"none"})


def test_the_per_category_table() -> None:
    table = format_categories(_result())
    lines = table.splitlines()
    assert "per category" in lines[1] and "vs fastest" in lines[2] and "tau" in lines[2]
    rows = [line.split() for line in lines[4:-1]]
    assert [r[:2] for r in rows if r[0] in ("a", "b")] == [["a", "(2)"], ["b", "(1)"]]
    lookup_a = next(r for r in rows if "lookup" in r)
    assert f"{20 / 0.75 / 12.5:.2f}x" in lookup_a and "1/2" in lookup_a
    assert lines[-1] == "fastest plain per category: a hf_greedy, b hf_greedy"
    assert format_categories({"methods": {}, "hf": {}, "fastest_plain": {"name": "none"}}) == ""


def test_slices_merge_into_the_whole_runs_category_figures() -> None:
    whole, merged = _result(), BM.merge([_result((0, 1)), _result((2,))])
    for name in ("none", "lookup", "hf_greedy"):
        w = {**whole["methods"], **whole["hf"]}[name]["categories"]
        m = {**merged["methods"], **merged["hf"]}[name]["categories"]
        assert list(m) == list(w), name
        for cat in w:
            for key in ("tokens_per_s", "speedup", "speedup_vs_fastest_plain", "tau", "alpha", "alpha_tested"):
                assert m[cat].get(key) == pytest.approx(w[cat].get(key)), (name, cat, key)
            assert (m[cat]["identical"], m[cat]["n_prompts"]) == (w[cat]["identical"], w[cat]["n_prompts"])
            assert m[cat]["tokens_per_s_median"] is None  # medians do not recombine
    assert merged["fastest_plain"]["categories"] == whole["fastest_plain"]["categories"]
    old = _result((2,))
    for d in list(old["methods"].values()) + list(old["hf"].values()):
        del d["categories"]  # a slice from before categories: the merge drops them
    merged = BM.merge([_result((0, 1)), old])
    assert "categories" not in merged["methods"]["lookup"] and "categories" not in merged["fastest_plain"]


SMOLLM2 = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specdec/models/smollm2-135m/hf"


@pytest.fixture
def uncalibrated(monkeypatch):
    """Engines the CLI loads skip calibration (~20 s on 2 cores; these tests check output, not speed)."""
    from specdec.engine import load as engine_load

    stock = engine_load.load_engine

    def load(target, draft, device, dtype, calibration, heads=None):
        return stock(target, draft, device, dtype, "off", heads=heads)

    monkeypatch.setattr(engine_load, "load_engine", load)


def test_a_prompt_too_long_for_the_model_is_named_by_file_and_line(uncalibrated, capsys) -> None:
    from specdec.cli.main import main
    from specdec.paths import DEFAULT_TARGET

    if not (DEFAULT_TARGET / "config.json").exists():
        pytest.skip(f"no shipped model at {DEFAULT_TARGET}")
    argv = ["bench", "--model", "tiny", "--prompts", "summarise", "--limit", "1", "--warmup", "0", "--no-progress"]
    assert main(argv) == 2  # the shipped tiny model has a 512-token window
    assert "summarise.jsonl:1 (summarise): the prompt is" in capsys.readouterr().err


@pytest.mark.skipif(
    not (SMOLLM2 / "config.json").exists(), reason=f"SmolLM2 is not installed at {SMOLLM2} (specdec models fetch)"
)
def test_a_short_real_bench_over_two_categories(tmp_path, capsys, uncalibrated) -> None:
    from transformers import AutoTokenizer

    from specdec.bench.prompts import load_items
    from specdec.cli.main import main

    tok = AutoTokenizer.from_pretrained(SMOLLM2)
    text = load_items("all", limit=1, categories=["rag"])[0].text(tok)
    assert text.startswith("<|im_start|>system\nAnswer") and text.endswith("<|im_start|>assistant\n")
    out = tmp_path / "bench.json"
    argv = ["bench", "--target", str(SMOLLM2), "--prompts", "all", "--categories", "chat,rag", "--limit", "1"]
    argv += ["--max-new-tokens", "8", "--warmup", "0", "--methods", "none,lookup", "--json", str(out), "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "bench: 2 prompts (chat 1, rag 1)" in printed.err
    assert "per category" in printed.out and "chat (1)" in printed.out and "rag (1)" in printed.out
    data = json.loads(out.read_text())
    assert data["config"]["categories"] == {"chat": 1, "rag": 1} and data["config"]["n_prompts"] == 2
    assert set(data["fastest_plain"]["categories"]) == {"chat", "rag"}
    for name, row in data["methods"].items():
        assert list(row["categories"]) == ["chat", "rag"], name
        for cat, d in row["categories"].items():
            assert d["n_prompts"] == 1 and d["identical"] == 1 and d["tokens_per_s"] > 0, (name, cat)
            assert d["tau"] >= 1.0 and d["speedup_vs_fastest_plain"] > 0, (name, cat)
        assert sum(d["total_tokens"] for d in row["categories"].values()) == row["total_tokens"]
