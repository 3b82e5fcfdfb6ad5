"""specdec.bench.run: the harness on real models (tiny workload), prompt-file errors, CLI parsing.

The models are the loader's defaults (``specdec.models.loading.DEFAULT_TARGET`` / ``DEFAULT_DRAFT``, i.e.
``$SPECDEC_ASSETS/target`` and ``/draft``, the shipped ``assets/`` when unset); the model tests
skip, saying why, only when those folders do not exist. While the shipped models are being
trained, run them against a snapshot: ``SPECDEC_ASSETS=.cache/specdec-train/snapshot pytest``.
"""

from __future__ import annotations

import json
import time

import pytest

from specdec.bench.run import PromptFileError, Row, load_prompts, make_rows
from specdec.core.config import ConfigError

PROMPTS = ["def fibonacci(n):\n    ", "import os\nimport sys\n\n\ndef main(argv):\n    "]
ROW_KEYS = {
    "tokens_per_s",
    "tokens_per_s_median",
    "speedup",
    "speedup_median",
    "predicted_speedup",
    "predicted_speedup_iid",
    "tau",
    "alpha",
    "alpha_per_position",
    "conditional_alpha_per_position",
    "c",
    "target_ms",
    "draft_ms_per_token",
    "identical",
    "n_prompts",
    "k",
}
HF_KEYS = {"tokens_per_s", "tokens_per_s_median", "speedup", "identical", "n_prompts", "settings"}


def _model_dirs():
    from specdec.models.loading import DEFAULT_DRAFT, DEFAULT_TARGET

    missing = [str(d) for d in (DEFAULT_TARGET, DEFAULT_DRAFT) if not (d / "config.json").exists()]
    if missing:
        pytest.skip(
            f"no model at {', '.join(missing)}: run `specdec train`, or set SPECDEC_ASSETS to a folder "
            "holding target/ and draft/ (e.g. .cache/specdec-train/snapshot)"
        )
    return DEFAULT_TARGET, DEFAULT_DRAFT


@pytest.fixture(scope="module")
def engine():
    from specdec.engine.session import Engine
    from specdec.models.loading import ModelLoadError

    target, draft = _model_dirs()
    try:
        return Engine.load(target, draft)
    except ModelLoadError:  # a training snapshot caught mid-write: try once more
        time.sleep(5)
        return Engine.load(target, draft)


def _write(tmp_path, lines: list[str]):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_run_bench_all_rows_exact_and_complete(engine, tmp_path) -> None:
    from specdec.bench.run import run_bench
    from specdec.bench.table import format_table

    path = _write(tmp_path, [json.dumps({"prompt": p, "source": "x"}) for p in PROMPTS])
    prompts = load_prompts(path)
    rows = make_rows(["none", "draft", "lookup"], ["auto"])
    res = run_bench(engine, prompts, rows, max_new_tokens=8, warmup=0, compare_hf=True, progress=False)
    json.dumps(res)  # JSON-ready
    assert set(res) == {"config", "methods", "hf", "fastest_plain"}
    assert res["config"]["n_prompts"] == 2 and res["config"]["max_new_tokens"] == 8
    assert list(res["methods"]) == ["none", "draft", "lookup"]
    for name, d in res["methods"].items():
        assert ROW_KEYS <= set(d), name
        assert d["n_prompts"] == 2
        assert d["identical"] == 2, f"{name} differs from none at temperature 0"
        assert d["tokens_per_s"] > 0 and d["tau"] >= 1.0
    none = res["methods"]["none"]
    assert none["tau"] == 1.0 and none["speedup"] == 1.0 and none["k"] is None and none["alpha"] is None
    assert none["target_ms"] > 0
    assert res["methods"]["lookup"]["k"] == "auto" and res["methods"]["draft"]["k"] == "auto"
    draft = res["methods"]["draft"]
    assert draft["c"] > 0 and draft["draft_ms_per_token"] > 0 and draft["predicted_speedup"] > 0
    assert 0.0 <= draft["alpha"] <= 1.0 and len(draft["alpha_per_position"]) >= 1
    assert set(res["hf"]) == {"hf_greedy", "hf_assisted", "hf_lookup"}
    for name, d in res["hf"].items():
        assert HF_KEYS <= set(d), name
        assert d["n_prompts"] == 2
    assert res["hf"]["hf_greedy"]["identical"] == 2, "our `none` differs from transformers' greedy generate"
    assert res["hf"]["hf_lookup"]["settings"]["prompt_lookup_num_tokens"] == 10
    assert res["hf"]["hf_assisted"]["settings"]["num_assistant_tokens"] == 20  # transformers' default
    fastest = res["fastest_plain"]  # the honest baseline: the faster of none and hf_greedy
    assert fastest["name"] in ("none", "hf_greedy")
    plain = max(none["tokens_per_s"], res["hf"]["hf_greedy"]["tokens_per_s"])
    assert fastest["tokens_per_s"] == plain
    for d in list(res["methods"].values()) + list(res["hf"].values()):
        assert d["speedup_vs_fastest_plain"] == pytest.approx(d["tokens_per_s"] / plain)
        assert d["speedup_vs_fastest_plain"] <= d["speedup"] + 1e-12 or fastest["name"] == "none"
    assert res["config"]["calibration"]["choices"] == engine.calibration.choices
    assert "auto_plain_steps" in draft
    table = format_table(res)
    assert "vs fastest" in table and f"{fastest['name']} at" in table
    for name in ("none", "draft", "lookup", "hf_greedy", "hf_assisted", "hf_lookup", "2/2"):
        assert name in table


def test_make_rows_names_and_k() -> None:
    assert make_rows(["draft", "lookup"]) == [
        Row("none", "none"),
        Row("draft", "draft", "auto"),
        Row("lookup", "lookup", "auto"),
    ]
    rows = make_rows(["none", "draft", "lookup"], [2, "auto"])
    assert [r.name for r in rows] == ["none", "draft@k=2", "draft@k=auto", "lookup@k=2", "lookup@k=auto"]
    assert rows[0].k is None and rows[-1].k == "auto"


def test_prompt_file_errors(tmp_path) -> None:
    with pytest.raises(PromptFileError, match="not found"):
        load_prompts(tmp_path / "nope.jsonl")
    bad = _write(tmp_path, ['{"prompt": "a"}', '{"prompt": "b"'])
    with pytest.raises(PromptFileError, match=r"prompts\.jsonl:2: not valid JSON"):
        load_prompts(bad)
    with pytest.raises(PromptFileError, match=":1: expected an object"):
        load_prompts(_write(tmp_path, ['{"text": "no prompt key"}']))
    with pytest.raises(PromptFileError, match="holds no prompts"):
        load_prompts(_write(tmp_path, ["", "  "]))
    assert issubclass(PromptFileError, ConfigError)
    assert load_prompts(_write(tmp_path, ['{"prompt": "a"}', "", '{"prompt": "b", "x": 1}']), limit=1) == ["a"]


def test_cli_parsing_and_errors(tmp_path, capsys) -> None:
    from specdec.cli.main import build_parser, main

    args = build_parser().parse_args(["bench", "--methods", "none,lookup", "--k", "1,auto", "--compare-hf"])
    assert args.methods == ["none", "lookup"] and args.k == [1, "auto"] and args.compare_hf
    assert args.max_new_tokens == 128 and args.warmup == 2 and args.repeats == 1 and args.hf_lookup_tokens == 10
    assert args.prompts.name == "code.jsonl" and args.hf_assistant_tokens is None
    for bad in (["--methods", "none,medusae"], ["--k", "0"], ["--k", "two"], ["--max-new-tokens", "0"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["bench", *bad])
    assert main(["bench", "--prompts", str(tmp_path / "missing.jsonl")]) == 2
    assert "prompt file not found" in capsys.readouterr().err


def test_cli_end_to_end_json(engine, tmp_path, capsys) -> None:
    from specdec.cli.main import main

    path = _write(tmp_path, [json.dumps({"prompt": PROMPTS[0]})])
    out = tmp_path / "out" / "bench.json"
    rc = main(
        [
            "bench",
            "--prompts",
            str(path),
            "--max-new-tokens",
            "4",
            "--warmup",
            "0",
            "--model",
            "tiny",
            "--no-draft",
            "--methods",
            "none,lookup",
            "--k",
            "2,auto",
            "--json",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    table = capsys.readouterr().out
    assert "lookup@k=2" in table and "lookup@k=auto" in table
    data = json.loads(out.read_text())
    assert list(data["methods"]) == ["none", "lookup@k=2", "lookup@k=auto"] and data["hf"] == {}
    assert data["config"]["machine"]["torch_threads"] >= 1 and data["config"]["models"]["draft"] is None


def test_each_timed_request_starts_cold(engine, prompts) -> None:
    """Our rows must prefill every request as the peers' rows do: after one request the target,
    the kept prefixes and the draft's cache hold the prompt; ``cold`` forgets them all."""
    from specdec.bench.run import cold
    from specdec.core.config import GenerateSpec
    from specdec.models import prefixes

    ids = engine.encode(prompts[0])[:60]
    engine.generate(ids, GenerateSpec(method="draft", max_new_tokens=8))
    assert len(engine.target.ids) >= len(ids) - 1 and engine.proposers["draft"].ids
    cold(engine)
    assert engine.target.ids == [] and not prefixes.kept(engine.target)
    assert engine.proposers["draft"].ids == [] and not engine.proposers["draft"].kept.kept
    out = engine.generate(ids, GenerateSpec(method="draft", max_new_tokens=8))
    assert out.stats.prefill_s > 0 and len(engine.target.ids) >= len(ids) - 1
