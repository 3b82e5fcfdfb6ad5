"""Front ends end to end on vLLM (the EAGLE server of vllm_helpers, started once): one WebSocket
stream from ``specdec serve --backend URL``, one gradio_client ``/generate`` from ``specdec demo
--backend URL``, one completion from ``specdec lsp --backend URL`` (pytest-lsp's real client);
each gives our engine's greedy tokens and says it is on a backend without rejected tokens."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient
from serve_helpers import check_stream, client, generate, until_done
from test_lsp_server import DEF_LINE, DOC, LINES, complete, configure, expected, open_doc
from vllm_helpers import EAGLE_PORT, free_port, vllm_servers  # noqa: F401 - the fixture

from specdec.core.config import GenerateSpec

pytestmark = pytest.mark.slow
URL = f"http://127.0.0.1:{EAGLE_PORT}/v1"
PROMPT = "def fibonacci(n):\n"


@pytest.fixture(scope="module")
def vllm_url(vllm_servers):  # noqa: F811
    return vllm_servers.url("eagle")


def _start(args: list[str], pattern: str) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "specdec", *args], stdout=subprocess.PIPE, text=True, env=env)
    for line in proc.stdout:
        found = re.search(pattern, line)
        if found:
            return proc, found.group(0)
    raise AssertionError(f"{args[0]} exited with {proc.wait()} before printing {pattern}")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_websocket_stream_on_vllm(vllm_url, engine) -> None:
    proc, ws_url = _start(["serve", "--port", "0", "--openai-port", "-2", "--backend", vllm_url], r"ws://\S+")
    try:
        with client(ws_url, token=None) as ws:  # reads and checks the hello
            generate(ws, "a", PROMPT, method="eagle", max_new_tokens=32)
            msgs = until_done(ws, "a")
        _, tokens = check_stream(msgs)
        assert tokens == engine.generate(PROMPT, GenerateSpec(method="none", max_new_tokens=32)).tokens
        kinds = {p["kind"] for m in msgs if m["type"] == "step" for p in m["pieces"]}
        assert "accepted" in kinds and "rejected" not in kinds  # vLLM never exposes rejected tokens
    finally:
        _stop(proc)


def test_gradio_generate_on_vllm(vllm_url, engine) -> None:
    from gradio_client import Client

    proc, url = _start(["demo", "--port", str(free_port()), "--backend", vllm_url], r"http://127\.0\.0\.1:\d+/")
    try:
        out = Client(url, verbose=False).predict(
            prompt=PROMPT, method="eagle", k="auto", max_new_tokens=24, api_name="/generate"
        )
        assert out["tokens"] == engine.generate(PROMPT, GenerateSpec(method="none", max_new_tokens=24)).tokens
        assert out["done"]
        from urllib.request import urlopen

        page = urlopen(url + "config", timeout=60).read().decode()
        assert "cannot show" in page and "rejected draft tokens" in page  # the page says what is missing
    finally:
        _stop(proc)


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=[sys.executable, "-m", "specdec", "lsp", "--backend", URL]),
)
async def lsp(lsp_client: LanguageClient):
    await lsp_client.initialize_session(
        t.InitializeParams(
            capabilities=pytest_lsp.client_capabilities("neovim"), initialization_options={"wait_for_model": True}
        )
    )
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="module")
async def test_lsp_completion_on_vllm(vllm_url, lsp, engine) -> None:  # vllm_url first: the server is up
    uri = "file:///vllm.py"
    open_doc(lsp, uri, DOC)
    col = len("def comp")
    want = expected(engine, "\n".join(LINES[:DEF_LINE]) + "\n" + LINES[DEF_LINE][:col], "line", 16)
    configure(lsp, method="eagle", stop="line", cache=False, max_new_tokens=16)
    got = await complete(lsp, uri, DEF_LINE, col)
    assert [i.insert_text for i in got.items] == [want]
