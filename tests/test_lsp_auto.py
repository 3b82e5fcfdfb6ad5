"""``specdec lsp --model auto`` (specdec/lsp/auto.py): the candidate order and the choice as pure logic
with made-up figures, the cache's round trip and what invalidates it, and one real run of the
loader on the installed SmolLM2 (the README's test command fetches it) with its p50 recorded."""

from __future__ import annotations

import argparse
import json
import statistics

import pytest

from specdec.catalog import known
from specdec.lsp import auto
from specdec.lsp.completion import Options


def test_candidates_most_capable_first_installed_only_never_the_fallback():
    every = auto.candidates(known.MODELS, lambda m: True)
    assert every == ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", "gemma3-270m", "smollm2-135m"]  # FIM, then size
    assert auto.candidates(known.MODELS, lambda m: m.name in ("smollm2-135m", "tiny")) == ["smollm2-135m"]
    assert auto.params(known.get("qwen2.5-coder-1.5b")) == 1.5e9 and auto.params(known.get("tiny")) == 8.7e6


def test_choose_takes_the_first_within_the_goal_and_never_asks_past_it():
    asked = []
    figures = {"big": 400.0, "broken": None, "mid": 150.0, "small": 20.0}

    def p50(name):
        asked.append(name)
        return figures[name]

    name, seen = auto.choose(["big", "broken", "mid", "small"], p50, goal=150)
    assert name == "mid" and asked == ["big", "broken", "mid"]  # the goal itself is met; small never loads
    assert seen == {"big": 400.0, "broken": None, "mid": 150.0}
    assert auto.choose(["big", "broken"], p50, goal=150)[0] == auto.FALLBACK
    assert auto.choose([], p50) == (auto.FALLBACK, {})


def test_the_cache_round_trips_and_any_changed_field_misses(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    f = auto.fields("smollm2-135m", 1, Options())
    figures = {"p50_ms": 42.0, "samples_ms": [40.0, 42.0, 50.0]}
    assert auto.read(f) is None
    auto.write(f, figures)
    assert auto.read(f) == figures
    record = json.loads(auto.cache_path(f).read_text())
    assert record["fields"]["threads"] == 1 and record["fields"]["flags"] == auto.cpu()["flags"]
    for change in ({"threads": 2}, {"flags": "other-cpu"}, {"torch": "0.0"}, {"max_new_tokens": 8}, {"measure": -1}):
        assert auto.read({**f, **change}) is None, change
    assert auto.fields("smollm2-135m", 2, Options()) != f
    assert auto.fields("smollm2-135m", 1, Options(method="none")) != f
    auto.cache_path(f).write_text("{not json")
    assert auto.read(f) is None
    # a file whose recorded fields differ (a hash collision, an edited file) is not trusted
    auto.cache_path(f).write_text(json.dumps({"fields": {**f, "threads": 9}, "figures": figures}))
    assert auto.read(f) is None


def _lsp_args(*argv: str) -> argparse.Namespace:
    from specdec.cli.lsp import add_arguments

    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


def test_auto_is_the_lsp_default_and_explicit_flags_win(monkeypatch):
    monkeypatch.delenv("SPECDEC_MODEL", raising=False)
    assert _lsp_args().default_model == "auto"
    monkeypatch.setenv("SPECDEC_MODEL", "tiny")
    assert _lsp_args().default_model == "tiny"  # $SPECDEC_MODEL still overrides the default


@pytest.mark.slow
def test_auto_loads_an_installed_model_and_records_its_measured_p50(tmp_path, monkeypatch):
    """The real loader on SmolLM2 (the candidate list cut to it and its weights fixed, to keep the
    test short; the suite's calibration cache is fresh, so loading it calibrates): it loads and
    measures it, keeps it or falls back to tiny by the goal, and a second start reads the cache
    without measuring."""
    from specdec.catalog import store
    from specdec.engine.load import engine_from_args

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    smol = known.get("smollm2-135m")
    assert store.installed(smol), "run `specdec models fetch smollm2-135m` (the README's test command does)"
    monkeypatch.setattr(auto, "candidates", lambda models, installed: ["smollm2-135m"])
    monkeypatch.setattr(auto, "N_PROMPTS", 3)
    monkeypatch.setattr(auto, "BUDGET_S", 8.0)
    args = _lsp_args("--model", "auto", "--threads", "1", "--weights", "fp32")  # fp32: no format timing, any CPU
    said: list[str] = []
    engine = auto.load(args, Options(), engine_from_args, said.append)
    figures = auto.read(auto.fields("smollm2-135m", 1, Options()))
    assert figures is not None and figures["date"]
    p50 = figures["p50_ms"]
    if p50 is None:  # rejected after one warm step slower than the goal (fp32 on a slow or busy machine)
        assert figures["step_ms"] > auto.GOAL_MS and f"one step {figures['step_ms']:.0f} ms" in said[0]
    else:
        assert len(figures["samples_ms"]) >= 1 and 0 < p50 == statistics.median(figures["samples_ms"])
        assert f"p50 {p50:.0f} ms" in said[0]
    chosen = "smollm2-135m" if auto.meets(figures) else auto.FALLBACK
    assert engine.model_name == chosen and f"-> {chosen}" in said[0]
    assert len(auto.candidates(known.MODELS, store.installed)) >= 1  # the real list holds it too

    def no_measure(*a, **k):
        raise AssertionError("measured again although cached")

    monkeypatch.setattr(auto, "measure", no_measure)
    said.clear()
    loaded = auto.load(args, Options(), lambda ns: argparse.Namespace(model_name=ns.model), said.append)
    assert loaded.model_name == chosen and "cached)" in said[0]
