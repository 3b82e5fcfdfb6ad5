"""Neovim headless (Debian's 0.7.2) as a real editor: it starts `specdec lsp`, opens a Python file
and asks for completion; the answer must be the engine's greedy continuation of the line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine import healing
from engine.config import GenerateSpec

pytestmark = pytest.mark.slow
PROBE = Path(__file__).with_name("lsp_nvim_probe.lua")
SOURCE = '''import os


def read_lines(path):
    """Return the lines of a text file."""
    with open(path) as f:
        return f.read().splitlines()


def read_words(path):
    """Return the words of a text file."""
    with open(pa'''


def test_neovim_gets_the_greedy_line_completion(tmp_path: Path, engine):
    nvim = shutil.which("nvim")
    assert nvim, "Neovim is a test dependency (Debian package neovim)"
    src = tmp_path / "words.py"
    src.write_text(SOURCE, encoding="utf-8")
    lines = SOURCE.split("\n")
    out = tmp_path / "result.json"
    env = dict(
        os.environ,
        SPECDEC_OUT=str(out),
        SPECDEC_PYTHON=sys.executable,
        SPECDEC_LINE=str(len(lines) - 1),
        SPECDEC_COL=str(len(lines[-1])),
        PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {PROBE}", str(src)],
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.exists(), f"no result from Neovim (rc {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    result = json.loads(out.read_text(encoding="utf-8"))
    assert "error" not in result, result
    cut = healing.split(SOURCE)
    full = engine.generate(SOURCE[:cut], GenerateSpec(method="none", max_new_tokens=16, heal=SOURCE[cut:])).text
    want = full.split("\n")[0] if "\n" in full else full
    assert want.strip() and [i["insertText"] for i in result["items"]] == [want]
