"""``specdec lsp --model auto`` (specdec/lsp/auto.py): the candidate order and the choice as pure logic
with made-up figures, the cache's round trip and what invalidates it, and one real run of the
loader on the installed SmolLM2 (the README's test command fetches it) with its p50 recorded."""

from __future__ import annotations

import argparse
import json
import statistics

import pytest

from specdec.catalog import known
from specdec.lsp import auto, fit
from specdec.lsp.completion import Options

GB = 1_000_000_000


def cand(name: str, fim: bool = False, params: float = 1e8, gb: float = 1.0) -> auto.Candidate:
    return auto.Candidate(name, fim, params, int(gb * GB))


def test_ranked_most_capable_first_never_the_fallback():
    cands = [cand("smol", params=1.35e8), cand("qwen-s", True, 5e8), cand("tiny"), cand("qwen-l", True, 1.5e9)]
    assert [c.name for c in auto.ranked(cands)] == ["qwen-l", "qwen-s", "smol"]  # FIM first, then size
    assert auto.params(known.get("qwen2.5-coder-1.5b")) == 1.5e9 and auto.params(known.get("tiny")) == 8.7e6


def test_fitting_refuses_what_exceeds_the_memory_allowed_unloaded():
    cands = [cand("qwen-l", True, 1.5e9, 18.0), cand("qwen-s", True, 5e8, 6.0), cand("smol", gb=2.1)]
    fits, refused = auto.fitting(cands, int(3 * GB))
    assert [c.name for c in fits] == ["smol"] and set(refused) == {"qwen-l", "qwen-s"}
    assert "needs ~18.0 GB, allowed 3.0 GB" in refused["qwen-l"]
    assert auto.fitting(cands, int(20 * GB))[0] == cands


def test_memory_allowed_is_a_fraction_of_what_is_free_and_never_above_the_cap(tmp_path):
    assert fit.allowed(16 * GB, 3 * GB) == 3 * GB and fit.allowed(4 * GB, 3 * GB) == 2 * GB
    assert fit.allowed(None, 3 * GB) == 3 * GB  # unknown: the cap alone
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32000000 kB\nMemAvailable:   24124816 kB\n")
    assert fit.available(meminfo) == 24124816 * 1024 and fit.available(tmp_path / "none") is None
    # the Qwen pair's weights (1.54e9 + 0.63e9 elements) against SmolLM2's (1.35e8): only SmolLM2 fits 3 GB
    assert fit.resident(2_170_000_000) > 15 * GB and fit.resident(135_000_000) < 3 * GB


def test_elements_reads_the_safetensors_headers_only(tmp_path):
    import torch
    from safetensors.torch import save_file

    save_file({"a": torch.zeros(3, 4), "b": torch.zeros(5, dtype=torch.bfloat16)}, str(tmp_path / "model.safetensors"))
    assert fit.elements(tmp_path) == 17 and fit.elements(tmp_path / "missing") == 0 and fit.elements(None) == 0


def test_choose_takes_the_first_within_the_goal_and_never_asks_past_it():
    asked = []
    figures = {"big": {"p50_ms": 400.0}, "broken": None, "mid": {"p50_ms": 150.0}, "small": {"p50_ms": 20.0}}

    def get(name):
        asked.append(name)
        return figures[name]

    name, seen = auto.choose(["big", "broken", "mid", "small"], get, goal=150)
    assert name == "mid" and asked == ["big", "broken", "mid"]  # the goal itself is met; small never loads
    assert seen == {"big": {"p50_ms": 400.0}, "broken": None, "mid": {"p50_ms": 150.0}}
    assert auto.choose([], get) == (auto.FALLBACK, {})


def test_a_real_model_that_fits_is_never_passed_over_for_tiny():
    slow = {
        "big": {"p50_ms": None, "step_ms": 300.0, "why": "one step 300 ms"},
        "mid": {"p50_ms": 400.0},
        "small": {"p50_ms": 250.0},
        "broken": {"p50_ms": None, "why": "failed: OSError"},
    }
    assert auto.choose(["big", "mid", "small", "broken"], slow.get, goal=150)[0] == "small"  # the fastest p50
    assert auto.choose(["big", "broken"], slow.get, goal=150)[0] == "big"  # stopped after one step, still real
    assert auto.choose(["broken"], slow.get, goal=150)[0] == auto.FALLBACK  # nothing loaded: tiny


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


class Loads:
    """A stand-in for ``load_engine``: records every load, holds at most what auto keeps, can fail."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.names: list[str] = []
        self.fail = fail

    def __call__(self, ns):
        self.names.append(ns.model)
        if ns.model in self.fail:
            raise OSError(f"{ns.model} is broken")
        return argparse.Namespace(model_name=ns.model)


def test_auto_walks_one_candidate_at_a_time_caches_the_decision_and_reuses_it(tmp_path, monkeypatch):
    """The loader on made-up candidates with the real caches on disk: the one too big is never
    loaded, a broken one is remembered as failed, the first within the goal is chosen, every step
    is said; the second start loads only the chosen model, measuring nothing."""
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    cands = [cand("qwen2.5-coder-1.5b", True, 1.5e9, 18), cand("qwen2.5-coder-0.5b", True, 5e8, 2.5)]
    cands.append(cand("smollm2-135m", params=1.35e8, gb=2.1))
    monkeypatch.setattr(auto, "installed", lambda: cands)
    monkeypatch.setattr(fit, "available", lambda: 16 * GB)
    measured = []

    def fake_measure(engine, options):
        measured.append(engine.model_name)
        return {"p50_ms": 90.0, "samples_ms": [90.0], "date": "now"}

    monkeypatch.setattr(auto, "measure", fake_measure)
    args, said, loads = _lsp_args("--model", "auto"), [], Loads(fail=("qwen2.5-coder-0.5b",))
    engine = auto.load(args, Options(), loads, said.append)
    assert engine.model_name == "smollm2-135m" and loads.names == ["qwen2.5-coder-0.5b", "smollm2-135m"]
    assert measured == ["smollm2-135m"]
    text = "\n".join(said)
    assert "qwen2.5-coder-1.5b: not loaded: needs ~18.0 GB, allowed 3.0 GB" in text
    assert "qwen2.5-coder-0.5b: failed: OSError: qwen2.5-coder-0.5b is broken" in text
    assert "auto -> smollm2-135m (meets the goal" in said[-1]
    broken = auto.read(auto.fields("qwen2.5-coder-0.5b", 1, Options()))
    assert broken["p50_ms"] is None and "broken" in broken["why"]  # the failure is cached too
    assert list(tmp_path.glob("lsp-auto-decision-*.json"))

    said.clear()
    loads = Loads()
    monkeypatch.setattr(auto, "measure", lambda *a: pytest.fail("measured again although decided"))
    assert auto.load(args, Options(), loads, said.append).model_name == "smollm2-135m"
    assert loads.names == ["smollm2-135m"] and "auto -> smollm2-135m (decided " in "\n".join(said)

    said.clear()  # --recalibrate decides again: the broken one is tried again, and so is the measure
    monkeypatch.setattr(auto, "measure", fake_measure)
    loads = Loads(fail=("qwen2.5-coder-0.5b",))
    auto.load(_lsp_args("--model", "auto", "--recalibrate"), Options(), loads, said.append)
    assert loads.names == ["qwen2.5-coder-0.5b", "smollm2-135m"]


def test_a_load_the_kernel_killed_is_remembered_as_failed(tmp_path, monkeypatch):
    """The record written before a load stays when the process dies during it: the next start skips
    that candidate instead of dying the same way; none other fits, so tiny is the choice."""
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    monkeypatch.setattr(auto, "installed", lambda: [cand("qwen2.5-coder-0.5b", True, 5e8, 2.5)])
    monkeypatch.setattr(fit, "available", lambda: 16 * GB)

    def killed(ns):
        raise SystemExit("killed")  # stands for SIGKILL: nothing after this line runs

    with pytest.raises(SystemExit):
        auto.load(_lsp_args("--model", "auto"), Options(), killed, lambda line: None)
    said, loads = [], Loads()
    assert auto.load(_lsp_args("--model", "auto"), Options(), loads, said.append).model_name == auto.FALLBACK
    assert loads.names == [auto.FALLBACK] and "never ended (killed?)" in "\n".join(said)


def test_a_shortage_of_free_memory_is_not_cached_as_the_decision(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    monkeypatch.setattr(auto, "installed", lambda: [cand("smollm2-135m", gb=2.1)])
    monkeypatch.setattr(fit, "available", lambda: 2 * GB)  # half of it, 1 GB, is allowed: nothing fits
    loads = Loads()
    assert auto.load(_lsp_args("--model", "auto"), Options(), loads, lambda line: None).model_name == auto.FALLBACK
    assert not list(tmp_path.glob("lsp-auto-decision-*.json"))


@pytest.mark.slow
def test_auto_loads_an_installed_model_and_records_its_measured_p50(tmp_path, monkeypatch):
    """The real loader on SmolLM2 (the candidate list cut to it and its weights fixed, to keep the
    test short; the suite's calibration cache is fresh, so loading it calibrates): its estimate is
    read from its files, it loads and is measured, and it is the choice whether or not it meets the
    goal (a real model that fits beats tiny); a second start reads the decision and measures nothing."""
    from specdec.catalog import store
    from specdec.engine.load import engine_from_args
    from specdec.lsp import measure

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    smol = known.get("smollm2-135m")
    assert store.installed(smol), "run `specdec models fetch smollm2-135m` (the README's test command does)"
    real = [c for c in auto.installed() if c.name == "smollm2-135m"]
    assert real and 2.73 * GB <= real[0].resident < 3 * GB  # measured peak 2.73 GB (docs/lsp.md); fits the cap
    monkeypatch.setattr(auto, "installed", lambda: real)
    monkeypatch.setattr(fit, "available", lambda: 16 * GB)
    monkeypatch.setattr(measure, "N_PROMPTS", 3)
    monkeypatch.setattr(measure, "BUDGET_S", 8.0)
    args = _lsp_args("--model", "auto", "--threads", "1", "--weights", "fp32")  # fp32: no format timing, any CPU
    said: list[str] = []
    engine = auto.load(args, Options(), engine_from_args, said.append)
    figures = auto.read(auto.fields("smollm2-135m", 1, Options()))
    assert figures is not None and figures["date"]
    p50 = figures["p50_ms"]
    if p50 is None:  # stopped after one warm step slower than the goal (fp32 on a slow or busy machine)
        assert figures["step_ms"] > measure.GOAL_MS and f"one step {figures['step_ms']:.0f} ms" in "\n".join(said)
    else:
        assert len(figures["samples_ms"]) >= 1 and 0 < p50 == statistics.median(figures["samples_ms"])
        assert f"p50 {p50:.0f} ms" in "\n".join(said)
    assert engine.model_name == "smollm2-135m" and "-> smollm2-135m" in said[-1]

    def no_measure(*a, **k):
        raise AssertionError("measured again although cached")

    monkeypatch.setattr(auto, "measure", no_measure)
    said.clear()
    loaded = auto.load(args, Options(), lambda ns: argparse.Namespace(model_name=ns.model), said.append)
    assert loaded.model_name == "smollm2-135m" and "(decided " in "\n".join(said)
