"""Neovim headless (Debian's 0.7.2) as a real editor: it starts `specdec lsp`, opens a Python file,
asks for completion and accepts it with the omnifunc recipe of docs/lsp.md. The item must be the
engine's healed greedy continuation of the line, and the buffer after accepting must be exactly
the expected text: one line added to, no NUL (Neovim 0.7 inserts a NUL for each newline of an item),
nothing from the next line at a line's end. And docs/lsp.md's 0.7-0.10 snippet itself, as the
configuration, with two Python buffers: one server process for both, and a completion once the
model has loaded (the default settings: it loads after ``initialized``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specdec.core import healing
from specdec.core.config import GenerateSpec

pytestmark = pytest.mark.slow
PROBE = Path(__file__).with_name("lsp_nvim_probe.lua")
TWO = Path(__file__).with_name("lsp_nvim_two.lua")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "lsp.md"
SOURCE = '''import os


def read_lines(path):
    """Return the lines of a text file."""
    with open(path) as f:
        return f.read().splitlines()


def read_words(path):
    """Return the words of a text file."""
    with open(pa'''


def _probe(tmp_path: Path, text: str, line: int, col: int, stop: str = "line") -> dict:
    nvim = shutil.which("nvim")
    assert nvim, "Neovim is a test dependency (Debian package neovim)"
    src = tmp_path / "words.py"
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "result.json"
    env = dict(
        os.environ,
        SPECDEC_OUT=str(out),
        SPECDEC_PYTHON=sys.executable,
        SPECDEC_LINE=str(line),
        SPECDEC_COL=str(col),
        SPECDEC_STOP=stop,
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
    return result


def _healed(engine, prefix: str) -> str:
    cut = healing.split(prefix)
    return engine.generate(prefix[:cut], GenerateSpec(method="none", max_new_tokens=16, heal=prefix[cut:])).text


def test_neovim_accepts_the_healed_line_completion_into_the_buffer(tmp_path: Path, engine):
    lines = SOURCE.split("\n")
    result = _probe(tmp_path, SOURCE, len(lines) - 1, len(lines[-1]))
    full = _healed(engine, SOURCE)
    want = full.split("\n")[0]
    assert want.strip() and [i["insertText"] for i in result["items"]] == [want]
    assert result["buffer"] == lines[:-1] + [lines[-1] + want]  # exactly the text, no NUL
    assert not any("\n" in ln or "\x00" in ln for ln in result["buffer"])


@pytest.mark.parametrize("stop", ["line", "block"])
def test_at_a_lines_end_neovim_never_gets_the_next_line(tmp_path: Path, engine, stop):
    text = SOURCE[: SOURCE.index("def read_words(path):") + len("def read_words(path):")]
    lines = text.split("\n")
    full = _healed(engine, text)
    assert full.startswith("\n")  # the model ends the line: the defect answered with the next line
    result = _probe(tmp_path, text, len(lines) - 1, len(lines[-1]), stop)
    assert result["items"] == [] and result["buffer"] == lines


QUOTED = [  # (the file, ending with the line before the cursor; what the editor auto-paired after it)
    (
        "class Log:\n    def __init__(self, path):\n        self.path = path\n\n    def save(self, text):\n"
        '        with open(self.path, "',
        '")',
    ),
    ("def f(d):\n    return d['", "']"),
]


@pytest.mark.parametrize("before, after", QUOTED)
def test_inside_auto_paired_quotes_neovim_never_doubles_the_closing_quote(tmp_path: Path, engine, before, after):
    """Issue 32, item 6: ``open(self.path, "|")`` became ``open(self.path, "w"")``."""
    quote = after[0]
    full = _healed(engine, before).split("\n")[0]
    assert quote in full  # the model closes the string itself: the case that doubled the quote
    lines = (before + after).split("\n")
    col = len(before.split("\n")[-1])
    result = _probe(tmp_path, before + after + "\n", len(lines) - 1, col)
    (item,) = [i["insertText"] for i in result["items"]]
    assert item == full[: full.index(quote)].rstrip() and quote not in item
    assert result["buffer"][len(lines) - 1] == lines[-1][:col] + item + after


def snippet(heading: str = "### Neovim 0.7-0.10") -> str:
    """The first Lua block under ``heading`` in docs/lsp.md, its command made this checkout's Python."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    code = section[section.index("```lua\n") + len("```lua\n") :]
    code = code[: code.index("```")]
    assert 'cmd = { "specdec", "lsp" }' in code
    return code.replace('cmd = { "specdec", "lsp" }', 'cmd = { os.getenv("SPECDEC_PYTHON"), "-m", "specdec", "lsp" }')


def test_two_python_buffers_share_one_server_with_the_docs_snippet(tmp_path: Path, engine):
    nvim = shutil.which("nvim")
    assert nvim, "Neovim is a test dependency (Debian package neovim)"
    init = tmp_path / "init.lua"
    init.write_text(snippet(), encoding="utf-8")
    a, b = tmp_path / "a.py", tmp_path / "words.py"
    a.write_text("import sys\n\n\ndef main():\n    return 0\n", encoding="utf-8")
    b.write_text(SOURCE, encoding="utf-8")
    lines = SOURCE.split("\n")
    out = tmp_path / "result.json"
    env = dict(
        os.environ,
        SPECDEC_OUT=str(out),
        SPECDEC_PYTHON=sys.executable,
        SPECDEC_INIT=str(init),
        SPECDEC_FILE_A=str(a),
        SPECDEC_FILE_B=str(b),
        SPECDEC_LINE=str(len(lines) - 1),
        SPECDEC_COL=str(len(lines[-1])),
        PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", "filetype on", "-c", f"luafile {TWO}"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert out.exists(), f"no result from Neovim (rc {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    result = json.loads(out.read_text(encoding="utf-8"))
    assert "error" not in result, result
    (client,) = result["clients"]  # one client for the editor
    assert client["name"] == "specdec" and result["attached"] == {"a": [client["id"]], "b": [client["id"]]}
    servers = [c for c in result["children"] if "python" in c["name"]]
    assert len(servers) == 1 and servers[0]["pid"] == result["pids"][0], result["children"]  # one process
    want = _healed(engine, SOURCE).split("\n")[0]
    assert [i["insertText"] for i in result["items"]] == [want]  # the model's line, once loaded
    print(f"\n{result['requests']} completion requests until the first item (the first empty: {result['first_empty']})")
