"""The specdec CLI end to end on the shipped models: --json output, colours, and bad input that
ends in a one-line error (exit 2), never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specdec.cli.main import main
from specdec.models.loading import DEFAULT_TARGET


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_generate_json_matches_the_engine(capsys, engine):
    from specdec.core.config import GenerateSpec

    code, out, _ = run(capsys, "generate", "def add(a, b):\n", "--method", "lookup", "--max-new-tokens", "12", "--json")
    assert code == 0
    obj = json.loads(out)
    assert set(obj) >= {"tokens", "text", "stats"}
    # generate heals the prompt's trailing newline (the model's first token spells it: docs/demo.md)
    ref = engine.generate("def add(a, b):", GenerateSpec(method="none", max_new_tokens=12, heal="\n"))
    assert obj["tokens"] == ref.tokens and obj["text"] == ref.text
    assert obj["stats"]["tau"] >= 1.0
    argv = ["generate", "def add(a, b):\n", "--method", "lookup", "--max-new-tokens", "12", "--json", "--no-heal"]
    code, out, _ = run(capsys, *argv)
    raw = engine.generate("def add(a, b):\n", GenerateSpec(method="none", max_new_tokens=12))
    assert code == 0 and json.loads(out)["tokens"] == raw.tokens != ref.tokens


@pytest.mark.slow
def test_generate_streams_text(capsys):
    code, out, err = run(capsys, "generate", "import os\n", "--method", "draft", "--k", "2", "--max-new-tokens", "8")
    assert code == 0 and out.startswith("import os\n") and "tau" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["generate", "", "--json"], "prompt is empty"),
        (["generate", "x", "--k", "0"], "k must be"),
        (["generate", "x", "--temperature", "-1"], "temperature must be"),
        (["generate", "x", "--top-p", "0"], "top_p must be"),
        (["generate", "x", "--top-p", "1.5"], "top_p must be"),
        (["generate", "x", "--max-new-tokens", "0"], "max_new_tokens must be"),
        (["generate", "x", "--target", "/nonexistent/model"], "target model folder not found"),
        (["generate", "x", "--draft", "/nonexistent/draft"], "draft model folder not found"),
        (["generate", "x", "--prompt-file", "/nonexistent/prompt.py"], "No such file"),
        (["generate", "x", "--dtype", "int3"], "unknown dtype"),
    ],
)
def test_bad_input_is_a_clear_error(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_unknown_method_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as e:
        main(["generate", "x", "--method", "beam"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_a_prompt_longer_than_the_context_is_a_clear_error(capsys):
    code, _, err = run(capsys, "generate", "x = 1\n" * 2000, "--no-draft", "--method", "none")
    assert code == 2 and "context window" in err


def test_a_draft_with_another_tokenizer_is_refused(tmp_path, capsys):
    import shutil

    from specdec.training.tokenizer import train_tokenizer

    other = tmp_path / "draft"
    shutil.copytree(DEFAULT_TARGET, other)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (other / f).unlink()
    train_tokenizer(["def f(x):\n    return x + 1\n"] * 50, 300, other)
    code, _, err = run(capsys, "generate", "x", "--draft", str(other))
    assert code == 2 and "different tokenizer" in err


def test_help_teaches_and_loads_no_torch():
    probe = "import sys; from specdec.cli.main import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    helptext = subprocess.run(
        [sys.executable, "-m", "specdec", "generate", "--help"], capture_output=True, text=True
    ).stdout
    assert "--method" in helptext and "auto" in helptext and "greedy" in helptext


def test_the_installed_console_script_works_from_any_folder(tmp_path):
    """`specdec` as pip installed it, run outside the checkout: every package it needs is installed
    (a package missing from pyproject's package list only shows up here), and the help lists every
    registry method with its description."""
    import shutil

    from specdec.core.methods import METHODS

    exe = shutil.which("specdec")
    assert exe, "the specdec console script is not installed (pip install -e .)"
    for sub in ("bench", "train", "demo", "serve", "lsp", "sweep"):
        out = subprocess.run([exe, sub, "--help"], capture_output=True, text=True, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
    helptext = subprocess.run([exe, "generate", "--help"], capture_output=True, text=True, cwd=tmp_path).stdout
    for m in METHODS.values():
        assert m.name in helptext and m.description in " ".join(helptext.split())
