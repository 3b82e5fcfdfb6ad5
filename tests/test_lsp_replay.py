"""The typing replay (tools/lsp_replay.py) on one document: its accounting adds up (functional only;
its timings are measured in docs/lsp.md, never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import lsp_replay

pytestmark = pytest.mark.slow


def test_replay_types_every_character_and_accounts_for_every_request(tmp_path: Path):
    out = tmp_path / "replay.json"
    argv = ["--limit", "1", "--chars", "6", "--key-ms", "2000", "--methods", "none", "--filters", "3", "--json"]
    assert lsp_replay.main(argv + [str(out)]) == 0
    res = json.loads(out.read_text(encoding="utf-8"))
    r = res["methods"]["none repeat_limit=3"]
    assert r["chars"] == 6 and r["keys"] + r["accepted_chars"] == 6
    assert r["shown"] <= r["keys"] and 0.0 <= r["accepted_share"] <= 1.0
    assert r["model"] + r["cache"] + r["superseded"] + r["filtered"] >= r["keys"] - r["late"]
