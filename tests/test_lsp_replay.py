"""The typing replay (specdec/bench/lsp_replay.py) on one document: its accounting adds up (functional only;
its timings are measured in docs/lsp.md, never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdec.bench import lsp_replay

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


def test_replay_times_superseded_requests_until_they_were_superseded(tmp_path: Path):
    """Keys faster than a completion: most requests are superseded; each one's time until its empty
    answer is reported (count and percentiles), so no request is missing from the figures."""
    out = tmp_path / "fast.json"
    argv = ["--limit", "1", "--chars", "8", "--key-ms", "30", "--methods", "none", "--json", str(out)]
    assert lsp_replay.main(argv) == 0
    res = json.loads(out.read_text(encoding="utf-8"))
    r, row = res["methods"]["none repeat_limit=3"], res["rows"]["none repeat_limit=3"][0]
    assert r["superseded_answers"] >= 1 and r["superseded_answers"] == len(row["superseded_ms"])
    assert r["empty_answers"] == len(row["empty_ms"])
    # every empty answer is one of the server's outcomes: superseded, filtered, or a model/cache blank
    assert r["superseded_answers"] + r["empty_answers"] <= r["superseded"] + r["filtered"] + r["model"] + r["cache"]
    assert all(ms > 0 for ms in row["superseded_ms"]) and r["superseded_p50_ms"] is not None
    assert len(row["ms"]) + len(row["empty_ms"]) + len(row["superseded_ms"]) <= r["keys"]
    assert r["model"] == len(row["model_ms"])


def test_profile_splits_each_answered_request_into_stages_that_add_up(tmp_path: Path):
    from specdec.bench import lsp_profile

    out = tmp_path / "profile.json"
    argv = ["--limit", "1", "--chars", "4", "--key-ms", "1500", "--methods", "none", "--json", str(out)]
    assert lsp_profile.main(argv) == 0
    res = json.loads(out.read_text(encoding="utf-8"))["methods"]["none"]
    assert res["n"] >= 1  # at least one request ran the model (a slow key: none is superseded)
    for row in res["rows"]:
        stages = sum(row[name] for name, _, _ in lsp_profile.STAGES)
        assert abs(stages - row["total"]) < 1e-6  # the stages tile the client's wall time
        assert all(row[name] >= -0.5 for name, _, _ in lsp_profile.STAGES)  # in order, one clock
        assert 1 <= row["steps_used"] <= row["steps_run"]
