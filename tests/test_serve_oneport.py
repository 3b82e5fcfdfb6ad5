"""``specdec serve`` as one listener (issue 32): the official ``openai`` client and a websockets
client on the same port; 64 concurrent clients of mixed lengths all answered, each identical to its
solo run; a full queue is a 429 ``rate_limit_error`` with ``Retry-After`` (HTTP) and ``busy`` with
``retry_after_s`` (WebSocket); ``--method``/``--k`` set the default of a request naming none, and an
unavailable ``--method`` is refused with the reason; SIGTERM ends an OpenAI stream with a
``finish_reason``. Real servers and real clients on loopback; every wait is bounded."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from specdec.cli.main import main as cli_main
from specdec.core.config import GenerateSpec
from specdec.server.ws_protocol import Limits
from tests.serve_helpers import (
    GOOD_ORIGIN,
    TIMEOUT_S,
    TOKEN,
    ServerThread,
    check_stream,
    client,
    generate,
    recv,
    until_done,
)

openai = pytest.importorskip("openai", reason="the openai client comes with the test extras (pip install -e .[test])")
pytestmark = pytest.mark.slow
LONG = "import os\n"  # greedy decoding runs past 300 tokens without EOS
CLIENTS = 64


def api(srv: ServerThread, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.http_url, api_key=TOKEN, max_retries=0, timeout=TIMEOUT_S * 4, **kwargs)


def plain(engine, prompt: str, n: int) -> list[int]:
    return engine.generate(prompt, GenerateSpec(method="none", max_new_tokens=n)).tokens


def test_openai_client_and_websocket_client_on_one_port(engine, prompts) -> None:
    prompt = prompts[0][-300:]
    ref = plain(engine, prompt, 24)
    with ServerThread(engine, Limits(), http=True) as srv:
        r = api(srv).completions.create(model="specdec", prompt=prompt, max_tokens=24, temperature=0)
        assert r.choices[0].model_extra["token_ids"] == ref and r.choices[0].finish_reason == "length"
        with client(srv.url) as ws:
            generate(ws, "w", prompt, max_new_tokens=24, temperature=0)
            assert check_stream(until_done(ws, "w"))[1] == ref
        models = api(srv).models.list()
        assert models.data[0].id == "specdec"
        with urllib.request.urlopen(srv.http_url.removesuffix("/v1") + "/health", timeout=TIMEOUT_S) as resp:
            assert json.load(resp) == {"status": "ok"}


def _ws_client(url: str, rid: int, prompt: str, n: int, out: dict) -> None:
    with client(url) as ws:
        generate(ws, rid, prompt, max_new_tokens=n, temperature=0)
        out[rid] = check_stream(until_done(ws, rid, timeout=TIMEOUT_S * 4))[1]


def _http_client(oa, rid: int, prompt: str, n: int, out: dict) -> None:
    if rid % 4 == 1:  # every other HTTP client streams
        stream = oa.completions.create(model="specdec", prompt=prompt, max_tokens=n, temperature=0, stream=True)
        out[rid] = [t for ch in stream for t in ch.choices[0].model_extra["token_ids"]]
    else:
        r = oa.completions.create(model="specdec", prompt=prompt, max_tokens=n, temperature=0)
        out[rid] = r.choices[0].model_extra["token_ids"]


@pytest.mark.parametrize("max_batch", [1, 8])  # the single-request loop; specdec serve's default batch
def test_sixty_four_concurrent_clients_all_answered_each_as_its_solo_run(engine, prompts, max_batch) -> None:
    jobs = [(i, prompts[i % len(prompts)][-(120 + 9 * i) :], 4 + (7 * i) % 37) for i in range(CLIENTS)]
    refs = {i: plain(engine, p, n) for i, p, n in jobs}
    out: dict[int, list[int]] = {}
    # the default queue bound; the HTTP threads share one key (one client): let it hold them all
    limits = Limits(max_per_client=CLIENTS, max_wait_s=TIMEOUT_S * 4)
    with ServerThread(engine, limits, http=True, max_batch=max_batch) as srv:
        oa = api(srv)
        threads = [
            threading.Thread(
                target=_http_client if i % 2 else _ws_client, args=(oa if i % 2 else srv.url, i, p, n, out)
            )
            for i, p, n in jobs
        ]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT_S * 5)
        wall = time.monotonic() - t0
    assert sorted(out) == list(range(CLIENTS)), f"unanswered: {sorted(set(range(CLIENTS)) - set(out))}"
    assert {i: out[i] for i in out} == refs
    print(f"max_batch {max_batch}: {CLIENTS} clients, {sum(map(len, refs.values()))} tokens in {wall:.1f} s")


def test_a_full_queue_is_a_429_rate_limit_error_with_retry_after(engine) -> None:
    limits = Limits(max_prompt_tokens=100, max_new_tokens=400, max_queue=1)
    with ServerThread(engine, limits, http=True) as srv, client(srv.url) as ws:
        generate(ws, "run", LONG, method="none", max_new_tokens=400)
        assert recv(ws)["type"] == "start"
        generate(ws, "wait", LONG, method="none", max_new_tokens=400)  # the one waiting place
        time.sleep(0.2)
        body = json.dumps({"model": "specdec", "prompt": LONG, "max_tokens": 4}).encode()
        req = urllib.request.Request(srv.http_url + "/completions", body, {"Authorization": f"Bearer {TOKEN}"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=TIMEOUT_S)
        assert e.value.code == 429 and e.value.headers["Retry-After"] == "1"
        err = json.load(e.value)["error"]
        assert err["type"] == "rate_limit_error" and err["code"] == "busy"
        with pytest.raises(openai.RateLimitError):
            api(srv).completions.create(model="specdec", prompt=LONG, max_tokens=4)
        generate(ws, "extra", LONG, method="none", max_new_tokens=4)
        while (msg := recv(ws))["type"] == "step":
            pass
        assert msg["type"] == "error" and msg["code"] == "busy" and msg["retry_after_s"] == 1


def test_the_server_default_method_and_k(engine, prompts) -> None:
    prompt = prompts[1][-200:]
    with ServerThread(engine, Limits(method="lookup", k=3), http=True) as srv:
        with client(srv.url) as ws:
            generate(ws, "d", prompt, max_new_tokens=8)
            start = recv(ws)
            assert (start["method"], start["k"]) == ("lookup", 3)
            until_done(ws, "d")
            generate(ws, "n", prompt, max_new_tokens=8, method="draft")
            start = recv(ws)
            assert (start["method"], start["k"]) == ("draft", "auto")
            until_done(ws, "n")
        assert api(srv).models.list().data[0].model_extra["specdec"]["default_method"] == "lookup"
    with ServerThread(engine, Limits(method="none"), http=True) as srv:
        r = api(srv).completions.create(model="specdec", prompt=prompt, max_tokens=12, temperature=0)
        assert all(st["draft_size"] == 0 for st in r.model_extra["specdec"]["steps"])


def test_an_unavailable_method_says_why_and_what_to_run(capsys) -> None:
    assert cli_main(["serve", "--no-draft", "--method", "draft", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "--method draft is not available" in err and "specdec train" in err
    assert cli_main(["serve", "--method", "lookup", "--k", "99", "--port", "0"]) == 2
    assert "k must be" in capsys.readouterr().err


def test_sigterm_ends_an_openai_stream_with_a_finish_reason() -> None:
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "specdec", "serve", "--port", "0", "--method", "none"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        ws_url, http_url = (re.search(r"(ws|http)://\S+", line).group(0) for line in lines)
        assert ws_url.split("//")[1] == http_url.split("//")[1].removesuffix("/v1")  # one port
        oa = openai.OpenAI(base_url=http_url, api_key="none", max_retries=0, timeout=TIMEOUT_S)
        stream = oa.completions.create(model="specdec", prompt=LONG, max_tokens=400, temperature=0, stream=True)
        chunks = [next(stream), next(stream)]
        proc.send_signal(signal.SIGTERM)
        chunks += list(stream)
        assert all(ch.choices for ch in chunks)
        assert [ch.choices[0].finish_reason for ch in chunks[:-1]] == [None] * (len(chunks) - 1)
        assert chunks[-1].choices[0].finish_reason == "abort"  # as vLLM ends an aborted request
        assert proc.wait(TIMEOUT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_origin_list_guards_the_http_routes_too(engine) -> None:
    with ServerThread(engine, Limits(), http=True) as srv:  # allow_origins: GOOD_ORIGIN only
        body = json.dumps({"model": "specdec", "prompt": "x = 1", "max_tokens": 2}).encode()
        for origin, status in (("http://evil.example", 403), (GOOD_ORIGIN, 200), (None, 200)):
            headers = {"Authorization": f"Bearer {TOKEN}"} | ({"Origin": origin} if origin else {})
            req = urllib.request.Request(srv.http_url + "/completions", body, headers)
            try:
                with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
                    got = resp.status
            except urllib.error.HTTPError as e:
                got = e.code
            assert got == status, origin
