"""``specdec bench --backend URL`` against our own /v1/completions: every row gives the baseline's
tokens, the remote rows carry acceptance, the concurrent row ran, and the JSON says so."""

from __future__ import annotations

import json

import pytest

from specdec.cli.main import main
from specdec.server.openai_api import OpenAIServer
from specdec.server.ws_protocol import Limits


@pytest.fixture(scope="module")
def url(backend):
    srv = OpenAIServer(backend, Limits(max_message_bytes=65536, max_prompt_tokens=511)).start()
    yield srv.url + "/v1"
    srv.stop()


def test_bench_backend_rows(url, tmp_path, capsys) -> None:
    out = tmp_path / "b.json"
    argv = ["bench", "--backend", url, "--methods", "draft", "--limit", "3", "--max-new-tokens", "12"]
    assert main(argv + ["--concurrency", "2", "--json", str(out)]) == 0
    rows = {r["name"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"ours:none", "ours:draft", "remote:draft", "raw:draft", "remote:draft@c2"}
    assert all(r["identical"] == r["prompts"] == 3 for r in rows.values())
    assert rows["remote:draft"]["alpha_per_position"][0] is not None
    assert "remote backend overhead" in capsys.readouterr().out
