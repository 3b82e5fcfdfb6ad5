"""Unit tests of the language server's pure logic (specdec.lsp.completion) and its command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from specdec.lsp.completion import (
    DEFAULT_METHOD,
    Options,
    OptionsError,
    TypeAhead,
    cut,
    finish,
    offset_at,
    tail,
    trim,
    word_before,
)


def test_offset_at_counts_utf16_units_and_clamps_to_the_line():
    text = "a = '😋'\nb\r\nlast"
    assert offset_at(text, 0, 0) == 0
    assert offset_at(text, 0, 7) == 6  # the emoji is two UTF-16 units, one Python character
    assert offset_at(text, 0, 7, "utf-32") == 7  # past the end of line 0 ("a = '😋'" has 7 chars)
    assert offset_at(text, 0, 9, "utf-8") == 6  # 4 UTF-8 bytes for the emoji
    assert offset_at(text, 0, 99) == 7  # past the end of the line: the line's end
    assert offset_at(text, 1, 99) == text.index("\r")  # a CRLF line ends before the \r
    assert offset_at(text, 2, 4) == len(text)
    assert offset_at(text, 3, 0) is None and offset_at(text, -1, 0) is None and offset_at(text, 0, -1) is None
    assert offset_at("", 0, 0) == 0 and offset_at("", 1, 0) is None
    assert offset_at("x\n", 1, 0) == 2


def test_cut_line_mode_ends_at_the_first_line_with_text():
    assert cut("rest(x)", "line", 0) is None  # the line is still growing
    assert cut("rest(x)\n    y", "line", 0) == "rest(x)"
    assert cut("\n    return x\n", "line", 0) == ""  # at a line's end: never the next line
    assert cut("\n", "line", 0) == "" and cut("  \n", "line", 0) == "" and cut("  ", "line", 0) is None
    assert finish("abc", "line", 0) == "abc" and finish("\n  \n", "line", 0) == ""


def test_cut_block_mode_ends_at_the_first_line_back_at_the_cursor_indent():
    body = "\n    a = 1\n\n    return a\n\ndef g():\n"
    assert cut(body, "block", 0) == "\n    a = 1\n\n    return a"
    assert cut("\n    a = 1\n    ", "block", 0) is None  # the next line's indent is not known yet
    assert cut("\n        x,\n    )\n", "block", 4) == "\n        x,\n    )"  # a closing bracket belongs
    assert cut("\n        x,\n    )", "block", 4) is None
    assert cut("y = 2\n    z = 3\n", "block", 4) == "y = 2"
    assert finish("\n    a = 1\n   \n", "block", 0) == "\n    a = 1"


def test_tail_and_trim_move_in_coarse_steps():
    text = "".join(f"line {i}\n" for i in range(2000))
    starts = {tail(text[:n], 3000) for n in range(len(text) - 500, len(text))}
    assert len(starts) <= 2 and all(s == 0 or text[s - 1] == "\n" for s in starts)
    assert tail("short", 3000) == 0
    assert trim(list(range(100)), 200) == 0
    assert trim(list(range(300)), 200) == 128  # 100 over, dropped in steps of 64
    assert 300 - trim(list(range(300)), 200) <= 200


def test_word_before():
    assert word_before("    x = self.comp") == "comp" and word_before("f(") == "" and word_before("") == ""


def test_typeahead_serves_the_rest_only_for_matching_typed_characters():
    cache = TypeAhead()
    key = ("line", 48, 0.0)
    cache.remember("u", "def f(", "x, y):", key)
    assert cache.rest("u", "def f(", key) == "x, y):"
    assert cache.rest("u", "def f(x,", key) == " y):"
    assert cache.rest("u", "def f(z", key) is None  # typed something else
    assert cache.rest("u", "def f(x, y):", key) is None  # typed all of it: nothing left to show
    assert cache.rest("u", "def f(x", ("block", 48, 0.0)) is None  # other settings
    assert cache.rest("v", "def f(x", key) is None
    assert cache.rest("u", "class f(x", key) is None  # the text before changed
    cache.forget("u")
    assert cache.rest("u", "def f(x", key) is None


def test_options_defaults_and_validation():
    methods = ("none", "draft", "lookup")
    o = Options()
    assert (o.max_new_tokens, o.stop, o.temperature, o.cache, o.telemetry) == (48, "line", 0.0, True, False)
    assert o.resolved_method(methods) == DEFAULT_METHOD == "lookup"
    assert o.resolved_method(("none",)) == "none"
    o2 = o.updated({"specdec": {"method": "draft", "stop": "block", "max_new_tokens": 64}}, methods)
    assert (o2.method, o2.stop, o2.max_new_tokens) == ("draft", "block", 64)
    assert o.updated(None, methods) is o
    for bad in (
        {"method": "medusa"},
        {"stop": "word"},
        {"max_new_tokens": 0},
        {"max_new_tokens": True},
        {"temperature": -1},
        {"k": 0},
        {"cache": "yes"},
        {"nope": 1, "stop": "line"},
        {"specdec": [1]},
        [1],
        {"repeat_limit": 1},
        {"multiline": "yes"},
        {"heal": 1},
    ):
        with pytest.raises(OptionsError):
            o.updated(bad, methods)


def test_settings_apply_the_valid_ones_and_name_each_bad_one():
    methods = ("none", "draft", "lookup")
    o = Options()
    new, errors = o.applied({"stop": "block", "max_new_tokens": 0, "telemetry": True, "k": "x", "typo": 1}, methods)
    assert (new.stop, new.telemetry, new.max_new_tokens, new.k) == ("block", True, 48, "auto")
    assert len(errors) == 3 and all(any(n in e for e in errors) for n in ("max_new_tokens", "k must", "'typo'"))
    for other in ({"pylsp": {"plugins": {}}}, {"specdec": None}, None, {}):
        assert o.applied(other, methods) == (o, [])  # another server's section, or nothing: no error
    assert o.applied({"specdec": {"stop": "block"}, "pylsp": {}}, methods)[0].stop == "block"


def test_cli_help_and_bad_flags():
    env_cmd = [sys.executable, "-m", "specdec", "lsp"]
    out = subprocess.run(env_cmd + ["--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--tcp HOST:PORT" in out.stdout and "initializationOptions" in out.stdout
    bad = subprocess.run(env_cmd + ["--tcp", "nohost"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr
    bad = subprocess.run(
        env_cmd + ["--stop", "block", "--max-new-tokens", "0"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "max_new_tokens" in bad.stderr and "Traceback" not in bad.stderr


def test_the_vscode_extension_exposes_and_forwards_every_setting():
    import json
    import re
    from dataclasses import fields
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "editors" / "vscode"
    props = json.loads((root / "package.json").read_text(encoding="utf-8"))["contributes"]["configuration"]
    names = {f.name for f in fields(Options)}
    assert {f"specdec.{n}" for n in names} | {"specdec.command", "specdec.args"} == set(props["properties"])
    js = (root / "extension.js").read_text(encoding="utf-8")
    forwarded = set(re.findall(r'"(\w+)"', js[js.index("FORWARDED") : js.index("];", js.index("FORWARDED"))]))
    assert forwarded == names
