"""specdec/fast/calibrate.py: the decisions on injected timings (no timing is asserted), the cache's
round trip and its invalidation by a torch or shape change, and forced paths giving the same
tokens."""

from __future__ import annotations

import json

import pytest
import torch

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.fast import calibrate as C
from specdec.models import packed as P


def _lin(stock, packed):
    return {str(r): {"stock": s, "packed": p} for r, s, p in zip(P.PROBE_ROWS, stock, packed)}


def test_decide_picks_packed_only_where_it_wins_by_the_margin() -> None:
    timings = {
        "linear": {
            "320x4096": _lin([100, 200, 300, 400], [50, 60, 290, 100]),  # 290 vs 300: inside 5%
            "64x64": _lin([5, 6, 7, 8], [30, 30, 30, 30]),
        }
    }
    got = C.decide(timings)
    assert got["linear"] == {"320x4096": [True, True, False, True], "64x64": [False, False, False, False]}
    assert C.decide(timings, margin=0.0)["linear"]["320x4096"] == [True, True, True, True]


def test_decide_threads_prefers_fewer_within_the_margin() -> None:
    assert C.decide({"threads": {"1": 10.0, "2": 6.0}})["threads"] == 2
    assert C.decide({"threads": {"1": 10.0, "2": 9.8}})["threads"] == 1  # 2% faster: keep one
    assert C.decide({"threads": {"1": 11.7, "2": 76.1}})["threads"] == 1  # a loaded machine


def test_decide_paths_tie_to_the_simpler_one() -> None:
    t = {"draft": {"hf": 3000.0, "lean": 1500.0}, "eagle": {"fused": 2000.0, "reference": 2050.0}}
    assert C.decide(t) == {"linear": {}, "draft": "lean", "eagle": "reference"}
    t = {"draft": {"hf": 1000.0, "lean": 1500.0}, "eagle": {"fused": 1000.0, "reference": 2050.0}}
    assert C.decide(t) == {"linear": {}, "draft": "hf", "eagle": "fused"}
    assert C.decide({"draft": {"hf": 5.0}})["draft"] == "hf"  # one path only
    assert C.decide({"target": {"hf": 8000.0, "lean": 5000.0}})["target"] == "lean"
    assert C.decide({"target": {"hf": 8000.0, "lean": 7800.0}})["target"] == "hf"  # inside 5%


def test_a_cache_taken_in_another_machine_state_is_stale_either_way() -> None:
    assert C.stale(11_170.0, 7_770.0)  # cached while other processes ran, quiet now: measure again
    assert not C.stale(7_900.0, 7_770.0)  # the same machine state: keep it
    assert not C.stale(7_770.0, 7_900.0)
    assert C.stale(7_770.0, 11_170.0)  # slower now than then (a busier host): its choices may differ
    assert not C.stale(None, 7_770.0)
    assert C.stale(10.0, 8.0, tolerance=0.1) and not C.stale(10.0, 8.0, tolerance=0.3)
    assert C.stale(10.0, 12.0, tolerance=0.1) and not C.stale(10.0, 12.0, tolerance=0.3)


def test_calibrate_measures_again_when_the_cache_was_taken_under_load(engine, tmp_path, monkeypatch) -> None:
    from specdec.fast import calibrate_time

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    first = C.calibrate(engine, "recalibrate")
    step = first.timings["threads"][str(first.choices["threads"])]
    rechecked = []
    monkeypatch.setattr(calibrate_time, "recheck", lambda e, path, n: rechecked.append((path, n)) or step / 2)
    assert not C.calibrate(engine, "auto").cached  # the machine is now twice as fast as the cache says
    assert rechecked == [(first.timings["threads_on"], first.choices["threads"])]
    cached_step = lambda n: C.read_cache(C.key_fields(engine))["threads"][str(n)]
    monkeypatch.setattr(calibrate_time, "recheck", lambda e, path, n: cached_step(n) * 1.02)
    assert C.calibrate(engine, "auto").cached
    monkeypatch.setattr(calibrate_time, "recheck", lambda e, path, n: cached_step(n) * 3)
    assert not C.calibrate(engine, "auto").cached  # three times slower now: measured again


def test_cache_round_trip_and_invalidation(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    fields = {"cpu": "x", "cpus": 2, "torch": "2.13.0", "shapes": ["4x4"]}
    timings = {"threads": {"1": 5.0}, "linear": {"4x4": _lin([1, 2, 3, 4], [2, 2, 2, 2])}}
    path = C.write_cache(fields, timings)
    assert path is not None and path.parent == tmp_path
    assert C.read_cache(fields) == timings
    assert C.read_cache(dict(fields, torch="2.14.0")) is None  # a torch upgrade misses
    assert C.read_cache(dict(fields, shapes=["4x8"])) is None  # other models miss
    path.write_text(json.dumps({"key": dict(fields, cpu="y"), "timings": timings}))
    assert C.read_cache(fields) is None  # a file whose key disagrees is not trusted
    path.write_text("{not json")
    assert C.read_cache(fields) is None


def test_calibrate_caches_and_a_torch_change_measures_again(engine, tmp_path, monkeypatch) -> None:
    from specdec.fast import calibrate_time

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    # the machine's state is held still here (the staleness test above varies it)
    cached_step = lambda n: C.read_cache(C.key_fields(engine))["threads"][str(n)]
    monkeypatch.setattr(calibrate_time, "recheck", lambda e, path, n: cached_step(n))
    first = C.calibrate(engine, "auto")
    assert set(first.choices["precision"]) == set(C.CL.parts(engine))
    assert not first.cached and first.path and first.timings["threads"]
    assert set(first.choices["linear"]) == {C.shape_key(s) for s in C._shapes(engine)}
    again = C.calibrate(engine, "auto")
    assert again.cached and again.timings == first.timings and again.choices == first.choices
    assert not C.calibrate(engine, "recalibrate").cached
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    assert not C.calibrate(engine, "auto").cached
    assert C.calibrate(engine, "off").choices == {}
    with pytest.raises(ValueError, match="auto, recalibrate or off"):
        C.calibrate(engine, "fast")
    assert "calibration" in again.summary() and "threads" in again.summary()


def _forced(engine, packed: bool, draft: str, eagle: str, target: str) -> dict:
    shapes = {C.shape_key(s): [packed] * len(P.PROBE_ROWS) for s in C._shapes(engine)}
    return {"linear": shapes, "draft": draft, "eagle": eagle, "target": target}


def test_every_forced_path_gives_the_same_tokens(engine, prompts) -> None:
    saved, threads = P.get_plan(), torch.get_num_threads()
    spec = lambda m: GenerateSpec(method=m, max_new_tokens=24, sampling=SamplingParams(temperature=0.0))
    want = engine.generate(prompts[0], spec("none")).tokens
    try:
        paths = ((True, "lean", "fused", "lean"), (False, "hf", "reference", "hf"), (True, "hf", "reference", "lean"))
        for packed, draft, eagle, target in paths:
            P.clear_plan()
            C.apply(engine, _forced(engine, packed, draft, eagle, target))
            for m in engine.methods:
                assert engine.generate(prompts[0], spec(m)).tokens == want, (m, packed, draft, eagle, target)
    finally:
        P.clear_plan()
        P.set_plan(saved)
        torch.set_num_threads(threads)
        C.apply(engine, engine.calibration.choices)
