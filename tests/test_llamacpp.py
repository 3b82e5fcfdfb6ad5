"""llama.cpp as a peer (``specdec bench --compare-llamacpp``): the flags, the figures, and a real run.

The pure parts run on canned data: llama-server's command line and request, agreement with our
``none`` row, the rows' figures (the same ``throughput`` as ours) and the table. The real test
builds llama-server once into the machine's cache (specdec/bench/llamacpp_build.py; about 15
minutes on 2 cores the first time, tests/conftest.py keeps that cache across test sessions) and
runs every row on SmolLM2's GGUF: a machine without cmake or a C++ compiler fails it, naming the
tool, rather than skipping.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specdec.bench import llamacpp as lc
from specdec.bench import llamacpp_build as build
from tests.smol_helpers import smol_engine


def test_server_argv_has_the_bench_flags():
    argv = lc.server_argv(Path("/x/llama-server"), Path("/m/a.gguf"), 2, 5555, ["--spec-type", "ngram-mod"])
    assert argv[:3] == ["/x/llama-server", "-m", "/m/a.gguf"]
    flags = dict(zip(argv[1::2], argv[2::2]))
    assert flags["-t"] == flags["-tb"] == "2" and flags["-c"] == "4096" and flags["-np"] == "1"
    assert flags["--host"] == "127.0.0.1" and flags["--port"] == "5555"
    assert argv[-2:] == ["--spec-type", "ngram-mod"]


def test_request_is_greedy_on_token_ids_without_the_prompt_cache():
    body = lc.request_body([1, 2, 3], 64)
    assert body["prompt"] == [1, 2, 3] and body["n_predict"] == 64
    assert body["temperature"] == 0 and body["top_k"] == 1
    assert body["cache_prompt"] is False and body["return_tokens"] is True and body["ignore_eos"] is False


def test_rows_and_their_speculative_types():
    assert {n: f[1:] for n, f in lc.row_flags(None, 2).items() if f} == {
        "llamacpp-ngram-simple": ["ngram-simple"],
        "llamacpp-ngram-mod": ["ngram-mod"],
    }
    assert lc.row_flags(None, 2)["llamacpp"] == []
    draft = lc.row_flags(Path("/d.gguf"), 3)["llamacpp-draft"]
    assert draft == ["--spec-type", "draft-simple", "-md", "/d.gguf", "-td", "3"]


def test_agreement_counts_identical_prompts_and_the_common_prefix():
    base = [[1, 2, 3, 4], [5, 6, 7], [8, 9]]
    runs = [[([1, 2, 3, 4], 1.0, None)], [([5, 6, 0], 1.0, None)], [([0, 9], 1.0, None)]]
    a = lc.agreement(runs, base)
    assert a["identical"] == 1 and a["mean_common_prefix"] == pytest.approx((4 + 2 + 0) / 3)
    assert a["mean_base_len"] == pytest.approx(3.0)
    assert lc.common_prefix([1, 2], [1, 2, 3]) == 2


def test_figures_are_our_rows_figures_with_agreement_and_draft_counters():
    none = [[([1, 2, 3, 4], 2.0, None)], [([5, 6], 1.0, None)]]
    base = [reps[0][0] for reps in none]
    timings = [{"draft_n": 6, "draft_n_accepted": 3}, {"draft_n": 2, "draft_n_accepted": 1}]
    row = [[([1, 2, 3, 4], 0.5, None)], [([5, 7], 0.5, None)]]
    d = lc.figures({"llamacpp-ngram-mod": (row, {"argv": [], **lc.draft_counters(timings)})}, none, base)
    d = d["llamacpp-ngram-mod"]
    assert d["tokens_per_s"] == pytest.approx(6 / 1.0) and d["speedup"] == pytest.approx(6.0 / (6 / 3.0))
    assert d["tokens_per_s_median"] == pytest.approx(6.0)
    assert d["identical"] == 1 and d["mean_common_prefix"] == pytest.approx(2.5)
    assert (d["drafted"], d["accepted"], d["alpha"]) == (8, 4, 0.5)
    assert lc.draft_counters([{}])["alpha"] is None


def test_bench_puts_the_rows_after_ours_in_result_table_and_categories(engine):
    from specdec.bench.run import Row, run_bench
    from specdec.bench.table import format_categories, format_table

    seen = {}

    def canned(texts, ids, max_new, repeats):  # llama-server's part replaced by canned runs
        seen.update(texts=texts, ids=ids, max_new=max_new)
        runs = [[([7] * max_new, 0.25, None)] for _ in ids]
        return {"llamacpp": (runs, {"argv": ["-t", "2"], **lc.draft_counters([])})}, {"gguf": "g", "threads": 2}

    prompts = ["def f(x):\n    ", "import os\n"]
    result = run_bench(
        engine, prompts, [Row("none", "none")], 8, 0, progress=False, categories=["a", "b"], llamacpp=canned
    )
    assert seen["texts"] == prompts and seen["ids"] == [engine.encode(p) for p in prompts] and seen["max_new"] == 8
    row = result["llamacpp"]["llamacpp"]
    assert row["tokens_per_s"] == pytest.approx(16 / 0.5) and row["n_prompts"] == 2
    assert set(row["categories"]) == {"a", "b"} and result["config"]["llamacpp"]["gguf"] == "g"
    table = format_table(result)
    assert "llamacpp" in table and "agreement with none" in table
    assert "llamacpp" in format_categories(result)


def test_missing_build_tools_are_named(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("SPECDEC_LLAMACPP", raising=False)
    monkeypatch.setenv("SPECDEC_LLAMACPP_ROOT", str(tmp_path / "root"))
    assert build.missing_tools()[0] == "cmake" and "C++ compiler" in build.missing_tools()[1]
    with pytest.raises(build.BuildError, match="cmake"):
        build.ensure_built()


def test_an_explicit_server_must_be_executable(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECDEC_LLAMACPP", str(tmp_path / "nope"))
    with pytest.raises(build.BuildError, match="SPECDEC_LLAMACPP"):
        build.server_binary()


def test_cache_folder_is_per_version_and_cpu(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECDEC_LLAMACPP_ROOT", str(tmp_path))
    d = build.install_dir()
    assert d.parent == tmp_path / build.VERSION and d.name.startswith(build.cpu_tag() + "-")
    assert build.cpu_tag() == build.cpu_tag() and build.cached_binary() is None


def test_x86_builds_leave_amx_out_and_other_flags_get_their_own_folder(monkeypatch, tmp_path):
    """ggml's AMX path segfaulted llama-server on an AMX CPU (issue 38): x86-64 builds turn it off."""
    x86 = build.cmake_flags("x86_64")
    assert "-DGGML_NATIVE=ON" in x86 and any("-mno-amx-int8" in f for f in x86 if f.startswith("-DCMAKE_CXX_FLAGS"))
    assert build.cmake_flags("aarch64") == build.BASE_FLAGS
    monkeypatch.setenv("SPECDEC_LLAMACPP_ROOT", str(tmp_path))
    here = build.install_dir()
    monkeypatch.setattr(build, "cmake_flags", lambda machine=None: build.BASE_FLAGS)
    assert build.install_dir() != here  # an AMX build cached earlier is not taken for this one


def test_a_model_without_gguf_is_refused(engine):
    with pytest.raises(lc.LlamaCppError, match="GGUF"):
        lc.engine_gguf(engine)


def test_the_flag_parses():
    from specdec.cli.main import build_parser

    assert build_parser().parse_args(["bench", "--compare-llamacpp"]).compare_llamacpp is True
    assert build_parser().parse_args(["bench"]).compare_llamacpp is False


QUESTIONS = [
    "What is the capital of France?",
    "Write a Python function that returns the square of a number.",
]
N = 16


@pytest.fixture(scope="module")
def smol():
    """SmolLM2 (tests/smol_helpers.py)."""
    return smol_engine(draft=False)


def _margin(engine, ids: list[int]) -> float:
    with torch.inference_mode():
        logits = engine.target.model(input_ids=torch.tensor([ids])).logits[0, -1].float()
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


@pytest.mark.slow
def test_llama_server_on_smollm2_gives_tokens_and_agrees_where_the_margin_is_large(smol):
    from specdec.core.config import GenerateSpec, SamplingParams
    from specdec.engine.chat import render

    texts = [render(smol.tokenizer, [{"role": "user", "content": q}]) for q in QUESTIONS]
    ids = [smol.encode(t) for t in texts]
    spec = GenerateSpec(method="none", max_new_tokens=N, sampling=SamplingParams(temperature=0.0))
    ours = [list(smol.generate(x, spec).tokens) for x in ids]
    rows, config = lc.runner_for(smol)(texts, ids, N, 1)  # builds llama-server here the first time
    assert set(rows) == set(lc.ROWS) and config["tokenize_agrees"] == len(texts)
    figures = lc.figures(rows, [[(t, 1.0, None)] for t in ours], ours)
    for name, (runs, extra) in rows.items():
        assert all(0 < len(reps[0][0]) <= N for reps in runs), name
        assert figures[name]["tokens_per_s"] > 0 and figures[name]["n_prompts"] == len(texts)
        assert "--spec-type" in extra["argv"] or name == "llamacpp"
    sure = [i for i, x in enumerate(ids) if _margin(smol, x) > 1.0]
    assert sure, "no prompt with a large first-token margin"
    for i in sure:  # llama.cpp quantizes activations: agreement is asked only where the top-2 gap is wide
        assert rows["llamacpp"][0][i][0][0][0] == ours[i][0], QUESTIONS[i]


@pytest.mark.slow
def test_the_build_command_finds_the_cached_build_and_says_so(capfd, monkeypatch, tmp_path):
    from specdec.cli.main import main

    build.server_binary()  # built once per machine (the test above may have done it)
    assert main(["llamacpp", "build"]) == 0
    out, err = capfd.readouterr()
    assert out.strip() == str(build.cached_binary()) and "cached" in err
    assert main(["llamacpp", "path"]) == 0 and capfd.readouterr().out.strip() == out.strip()
    monkeypatch.setenv("SPECDEC_LLAMACPP", out.strip())  # another build, used as is
    monkeypatch.setenv("SPECDEC_LLAMACPP_ROOT", str(tmp_path))
    assert build.server_binary() == Path(out.strip())
