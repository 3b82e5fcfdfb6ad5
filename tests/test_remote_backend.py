"""RemoteBackend against our own /v1/completions (no vLLM needed): the same tokens and fates as the
local backend, errors mapped to the Backend protocol's (ConfigError, Busy), cancel ends a stream."""

from __future__ import annotations

import pytest

from specdec.core.config import ConfigError, GenerateSpec
from specdec.models.loading import DEFAULT_TARGET
from specdec.server.openai_api import OpenAIServer
from specdec.server.ws_protocol import Limits
from specdec.serving.backend import Request
from specdec.serving.remote import RemoteBackend

TOKEN = "remote-t0ken"


@pytest.fixture(scope="module")
def server(backend):
    srv = OpenAIServer(backend, Limits(max_message_bytes=65536, max_prompt_tokens=511), token=TOKEN).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def remote(server):
    r = RemoteBackend(server.url + "/v1", DEFAULT_TARGET, token=TOKEN).wait_ready()
    yield r
    r.shutdown(10)


@pytest.mark.parametrize("method", ["draft", "lookup", "eagle"])
def test_remote_events_equal_local(remote, backend, prompts, method) -> None:
    # a fixed k gives both runs the same steps (auto k follows measured timings, tests/seeded.py)
    spec = GenerateSpec(method=method, k=4 if method != "eagle" else 16, max_new_tokens=32)
    local = list(backend.submit(Request(prompts[2], spec)))
    h = remote.submit(Request(prompts[2], spec))
    events = list(h)
    assert h.stop == local[-1].stop and h.started()
    assert [ev.token_ids for ev in events] == [ev.token_ids for ev in local]
    assert [[(p.kind, p.token_id, p.position) for p in ev.pieces] for ev in events] == [
        [(p.kind, p.token_id, p.position) for p in ev.pieces] for ev in local
    ]
    assert events[-1].stats.accepted == local[-1].stats.accepted


def test_remote_knows_the_server(remote, backend) -> None:
    assert remote.kind == "specdec" and remote.capabilities.fates
    assert set(remote.methods) == set(backend.methods) and remote.limits.context == backend.limits.context
    assert remote.encode("def f(x):") == backend.encode("def f(x):")


def test_remote_errors_and_cancel(remote, server, prompts) -> None:
    with pytest.raises(ConfigError):
        RemoteBackend(server.url, DEFAULT_TARGET, token=TOKEN).wait_ready().submit(
            Request("x" * 4000, GenerateSpec(method="none"))
        )
    bad = RemoteBackend(server.url, DEFAULT_TARGET, token="wrong")
    with pytest.raises(ConnectionError):
        bad.wait_ready()
    h = remote.submit(Request(prompts[0], GenerateSpec(method="none", max_new_tokens=200)))
    first, _ = h.next_batch(timeout=60)
    assert first
    h.cancel()
    list(h)
    assert h.stop == "cancelled"
    assert list(remote.submit(Request("def f(x):", GenerateSpec(method="none", max_new_tokens=3))))


def test_generate_cli_on_a_remote_server(server, engine, capsys) -> None:
    import json

    from specdec.cli.main import main

    argv = ["generate", "def add(a, b):\n", "--method", "lookup", "--max-new-tokens", "12", "--json"]
    assert main(argv + ["--backend", server.url + "/v1", "--backend-token", TOKEN]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == engine.generate("def add(a, b):\n", GenerateSpec(method="none", max_new_tokens=12)).tokens
    assert main(argv + ["--backend", "http://127.0.0.1:9/v1"]) == 2  # unreachable: one-line error
    assert "cannot reach" in capsys.readouterr().err
