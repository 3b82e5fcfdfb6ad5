"""The WebSocket server end to end on the shipped models, driven by real websockets clients on
loopback: exact streams (equal to `specdec generate` and to solo runs, also under eight concurrent
clients), cancel and disconnect within one engine step, a full queue, every bad input, auth and
origin checks, and graceful shutdown on SIGTERM (a real subprocess)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from websockets.asyncio.client import connect as aconnect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from specdec.cli.main import main as cli_main
from specdec.core.config import GenerateSpec, SamplingParams
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
    send,
    until_done,
)

pytestmark = pytest.mark.slow
LIMITS = Limits(max_message_bytes=4096, max_prompt_tokens=100, max_new_tokens=400, max_queue=8, context=512)
LONG = "import os\n"  # greedy decoding runs past 300 tokens without EOS


@pytest.fixture(scope="module")
def srv(engine):
    with ServerThread(engine, LIMITS) as s:
        yield s


def solo(engine, prompt: str, **params) -> tuple[str, list[int]]:
    sampling = {k: params.pop(k) for k in ("temperature", "top_k", "top_p", "seed") if k in params}
    res = engine.generate(prompt, GenerateSpec(**params, sampling=SamplingParams(**sampling)))
    return res.text, res.tokens


def test_greedy_stream_equals_specdec_generate(srv, engine, capsys):
    prompt, n = "def fibonacci(n):\n", 40
    argv = ["generate", prompt, "--method", "draft", "--max-new-tokens", str(n), "--json", "--no-heal"]
    assert cli_main(argv) == 0  # the server does not heal prompts (yet): compare with the prompt as sent
    ref = json.loads(capsys.readouterr().out)
    with client(srv.url) as ws:
        generate(ws, "g1", prompt, method="draft", max_new_tokens=n, temperature=0)
        msgs = until_done(ws, "g1")
    text, tokens = check_stream(msgs)
    assert (text, tokens) == (ref["text"], ref["tokens"])
    assert msgs[-1]["stop"] == ref["stop"] == "length"
    kinds = {pc["kind"] for m in msgs if m["type"] == "step" for pc in m["pieces"]}
    assert kinds & {"accepted", "rejected", "bonus", "recovered"}  # draft fates really are streamed
    assert msgs[0]["prompt_tokens"] == len(engine.encode(prompt)) and msgs[0]["method"] == "draft"


REQUESTS = [  # eight different requests, one per concurrent client
    ("def add(a, b):\n", dict(method="draft", max_new_tokens=24)),
    ("class Stack:\n", dict(method="lookup", max_new_tokens=24)),
    ("import os\n", dict(method="none", max_new_tokens=24)),
    ("for i in range(10):\n", dict(method="draft", k=3, max_new_tokens=24)),
    ("def parse(text):\n", dict(method="none", max_new_tokens=24, temperature=0.8, seed=11)),
    # seeded sampling: a fixed k gives both runs the same random draws (auto k follows timings, tests/seeded.py)
    ("while True:\n", dict(method="lookup", k=8, max_new_tokens=24, temperature=1.0, top_k=40, seed=3)),
    ("x = [", dict(method="draft", k=2, max_new_tokens=24)),
    ("try:\n", dict(method="none", max_new_tokens=24, temperature=0.7, top_p=0.9, seed=5)),
]


def test_eight_concurrent_clients_each_get_their_own_exact_stream(srv, engine):
    expected = [solo(engine, prompt, **dict(params)) for prompt, params in REQUESTS]

    async def one(i: int, prompt: str, params: dict, go: asyncio.Event) -> list[dict]:
        async with aconnect(srv.url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            assert json.loads(await ws.recv())["type"] == "hello"
            await go.wait()
            await asyncio.sleep(0.05 * i)  # staggered, so that requests queue up behind each other
            await ws.send(json.dumps({"type": "generate", "id": f"c{i}", "prompt": prompt, **params}))
            msgs = []
            while not msgs or msgs[-1]["type"] not in ("done", "error"):
                msgs.append(json.loads(await ws.recv()))
            return msgs

    async def all_clients() -> list[list[dict]]:
        go = asyncio.Event()
        tasks = [asyncio.create_task(one(i, p, dict(kw), go)) for i, (p, kw) in enumerate(REQUESTS)]
        await asyncio.sleep(0.2)
        go.set()
        return await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT_S)

    streams = asyncio.run(all_clients())
    for i, msgs in enumerate(streams):
        assert all(m["id"] == f"c{i}" for m in msgs)
        assert check_stream(msgs) == expected[i], f"client {i} got a different stream"
    # the model thread records a request in ``finished`` just after its ``done`` went out: wait for the last one
    want, deadline = sorted(f"c{i}" for i in range(8)), time.monotonic() + 5.0

    def served_last() -> list:
        return [j for j in srv.server.backend.finished if str(j.id).startswith("c")][-8:]

    while sorted(j.id for j in served_last()) != want and time.monotonic() < deadline:
        time.sleep(0.01)
    served = served_last()
    assert sorted(j.id for j in served) == sorted(f"c{i}" for i in range(8))
    assert [j.seq for j in served] == sorted(j.seq for j in served)  # first come (to the server), first served


def test_cancel_mid_stream_then_the_connection_is_reused(srv, engine):
    with client(srv.url) as ws:
        generate(ws, "long", LONG, method="none", max_new_tokens=400)
        assert recv(ws)["type"] == "start"
        assert recv(ws)["type"] == "step" and recv(ws)["type"] == "step"
        send(ws, type="cancel", id="long")
        rest = until_done(ws, "long")
        assert rest[-1]["stop"] == "cancelled" and rest[-1]["tokens"] < 400
        job = srv.finished("long")
        assert job.stop == "cancelled" and job.steps - job.steps_at_cancel <= 1  # within one engine step
        generate(ws, "long", "def add(a, b):\n", method="lookup", max_new_tokens=16)  # the id is free again
        assert check_stream(until_done(ws, "long")) == solo(
            engine, "def add(a, b):\n", method="lookup", max_new_tokens=16
        )


@pytest.mark.parametrize("abrupt", [False, True])
def test_disconnect_mid_stream_cancels_and_the_server_serves_the_next_client(srv, engine, abrupt):
    rid = f"gone-{abrupt}"
    ws = client(srv.url)
    generate(ws, rid, LONG, method="draft", max_new_tokens=400)
    assert recv(ws)["type"] == "start" and recv(ws)["type"] == "step"
    if abrupt:
        ws.socket.close()  # no closing handshake: the TCP connection just drops
    else:
        ws.close()
    job = srv.finished(rid)
    assert job.stop == "cancelled" and job.steps - job.steps_at_cancel <= 1
    with client(srv.url) as ws2:
        generate(ws2, "next", "class Stack:\n", method="draft", max_new_tokens=16)
        msgs = until_done(ws2, "next")
    assert check_stream(msgs) == solo(engine, "class Stack:\n", method="draft", max_new_tokens=16)
    assert msgs[0]["queued_ms"] < 5000


def test_a_full_queue_answers_busy_at_once(engine):
    with ServerThread(engine, Limits(max_prompt_tokens=100, max_new_tokens=400, max_queue=1)) as small:
        with client(small.url) as ws:
            generate(ws, "run", LONG, method="none", max_new_tokens=400)
            assert recv(ws)["type"] == "start"
            generate(ws, "wait", LONG, method="none", max_new_tokens=400)  # fills the queue (1 waiting)
            t0 = time.monotonic()
            generate(ws, "extra", LONG, method="none", max_new_tokens=8)
            while (msg := recv(ws))["type"] == "step":
                assert msg["id"] == "run"
            assert msg["type"] == "error" and msg["code"] == "busy" and msg["id"] == "extra"
            assert time.monotonic() - t0 < 5
            send(ws, type="cancel", id="wait")  # a queued request ends without ever starting
            send(ws, type="cancel", id="run")
            ends = {}
            while len(ends) < 2:
                msg = recv(ws)
                assert msg["type"] in ("step", "done") and msg["id"] in ("run", "wait")
                if msg["type"] == "done":
                    ends[msg["id"]] = msg
            assert ends["wait"]["stop"] == ends["run"]["stop"] == "cancelled" and ends["wait"]["tokens"] == 0


BAD_INPUTS = [  # (raw message, expected code, expected id)
    ("not json", "bad_json", None),
    ("[1, 2, 3]", "bad_message", None),
    ('{"type": "generate", "prompt": "x"}', "bad_message", None),
    ('{"type": "launch", "id": "b1"}', "unknown_type", "b1"),
    ('{"type": "generate", "id": "b2", "prompt": "x", "method": "beam"}', "unknown_method", "b2"),
    ('{"type": "generate", "id": "b3", "prompt": "x", "k": 0}', "bad_params", "b3"),
    ('{"type": "generate", "id": "b4", "prompt": "x", "temperature": -1}', "bad_params", "b4"),
    ('{"type": "generate", "id": "b5", "prompt": "x", "top_p": 2}', "bad_params", "b5"),
    ('{"type": "generate", "id": "b6", "prompt": "x", "colour": "red"}', "bad_params", "b6"),
    ('{"type": "generate", "id": "b7", "prompt": ""}', "bad_params", "b7"),
    ('{"type": "generate", "id": "b8", "prompt": "x", "max_new_tokens": 513}', "bad_params", "b8"),  # above the context
    (json.dumps({"type": "generate", "id": "b9", "prompt": "x = 1\n" * 60}), "prompt_too_long", "b9"),
    (json.dumps({"type": "generate", "id": "b10", "prompt": "x" * 5000}), "too_large", None),
    ('{"type": "cancel", "id": "never-sent"}', "unknown_id", "never-sent"),
    ('{"type": "generate", "id": "b11", "messages": [{"role": "user", "content": "Hi"}]}', "no_chat_template", "b11"),
    ('{"type": "generate", "id": "b12", "messages": [], "prompt": "x"}', "bad_params", "b12"),
]


def test_every_bad_input_gets_its_error_and_the_connection_stays_usable(srv, engine):
    with client(srv.url) as ws:
        for raw, code, rid in BAD_INPUTS:
            ws.send(raw)
            msg = recv(ws)
            assert (msg["type"], msg["code"], msg["id"]) == ("error", code, rid), (raw[:60], msg)
            assert msg["message"]
        ws.send(b'{"type": "cancel", "id": "x"}')
        assert recv(ws)["code"] == "bad_message"
        generate(ws, "dup", LONG, method="none", max_new_tokens=400)
        generate(ws, "dup", "x", method="none", max_new_tokens=4)
        msg = recv(ws)
        while msg["type"] != "error":
            msg = recv(ws)
        assert (msg["code"], msg["id"]) == ("duplicate_id", "dup")
        send(ws, type="cancel", id="dup")
        assert until_done(ws, "dup")[-1]["stop"] == "cancelled"
        generate(ws, "ok", "def add(a, b):\n", method="draft", max_new_tokens=12)
        assert check_stream(until_done(ws, "ok")) == solo(engine, "def add(a, b):\n", method="draft", max_new_tokens=12)


def _closed_with_policy_violation(url: str, **kwargs) -> None:
    from websockets.sync.client import connect

    with connect(url, open_timeout=TIMEOUT_S, **kwargs) as ws:
        msg = json.loads(ws.recv(timeout=TIMEOUT_S))
        assert msg["type"] == "error" and msg["code"] == "unauthorized"
        with pytest.raises(ConnectionClosed) as e:
            ws.recv(timeout=TIMEOUT_S)
    assert e.value.rcvd is not None and e.value.rcvd.code == 1008


def test_auth_no_token_wrong_token_right_token(srv):
    _closed_with_policy_violation(srv.url)
    _closed_with_policy_violation(srv.url, additional_headers={"Authorization": "Bearer wrong"})
    _closed_with_policy_violation(srv.url + "/?token=wrong")
    with client(srv.url) as ws:  # Authorization: Bearer <token>
        generate(ws, "a", "x = ", method="none", max_new_tokens=3)
        assert until_done(ws, "a")[-1]["type"] == "done"
    with client(srv.url + f"/?token={TOKEN}", token=None) as ws:
        generate(ws, "a", "x = ", method="none", max_new_tokens=3)
        assert until_done(ws, "a")[-1]["type"] == "done"


def test_origin_check(srv):
    with pytest.raises(InvalidStatus) as e:
        client(srv.url, origin="http://evil.example")
    assert e.value.response.status_code == 403
    client(srv.url, origin=GOOD_ORIGIN).close()


def test_sigterm_ends_running_and_queued_requests_with_shutdown():
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "specdec", "serve", "--port", "0", "--max-queue", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()
        assert "listening on ws://127.0.0.1:" in line, line + proc.stderr.read()
        url = re.search(r"ws://\S+", line).group(0)
        with client(url, token=None) as ws:
            generate(ws, "run", LONG, method="draft", max_new_tokens=400)
            generate(ws, "queued", LONG, method="none", max_new_tokens=400)
            while recv(ws)["type"] != "step":  # both may start: the server batches by default
                pass
            proc.send_signal(signal.SIGTERM)
            stops = {}
            while len(stops) < 2:
                msg = recv(ws)
                if msg["type"] == "done":
                    stops[msg["id"]] = msg["stop"]
            assert stops == {"run": "shutdown", "queued": "shutdown"}
            with pytest.raises(ConnectionClosed) as e:
                ws.recv(timeout=TIMEOUT_S)
            assert e.value.rcvd is not None and e.value.rcvd.code == 1001  # going away
        assert proc.wait(TIMEOUT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_example_page_streams_coloured_fates_in_a_real_browser(engine):
    from pathlib import Path

    from playwright.sync_api import sync_playwright

    page_path = Path(__file__).resolve().parent.parent / "assets" / "web" / "stream.html"
    prompt, n = "def fibonacci(n):\n", 24
    with ServerThread(engine, LIMITS, allow_origins=("null",)) as s, sync_playwright() as pw:  # a file:// page
        browser = pw.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            page = browser.new_page()
            page.goto(f"{page_path.as_uri()}?server={s.url}&token={TOKEN}")
            page.wait_for_selector("#generate:not([disabled])", timeout=30_000)
            page.select_option("#method", "draft")
            page.fill("#k", "4")  # a fixed k: auto k follows measured costs, and a plain-only run has no rejection
            page.fill("#max_new_tokens", str(n))
            page.click("#generate")
            page.wait_for_function("document.getElementById('status').textContent.startsWith('done')", timeout=60_000)
            spans = page.eval_on_selector_all(
                "#out span",
                "els => els.map(e => [e.className, e.textContent, "
                "getComputedStyle(e).color, getComputedStyle(e).textDecorationLine])",
            )
        finally:
            browser.close()
    assert spans[0][:2] == ["prompt", prompt]
    shown = "".join(text for kind, text, _, _ in spans[1:] if kind != "rejected")
    assert shown == solo(engine, prompt, method="draft", k=4, max_new_tokens=n)[0]
    style = {kind: (colour, line) for kind, _, colour, line in spans[1:]}
    assert style["accepted"][0] == "rgb(10, 125, 34)"
    assert style["rejected"] == ("rgb(198, 40, 40)", "line-through")  # this prompt always has rejections
    assert style.get("recovered", ("rgb(224, 112, 0)",))[0] == "rgb(224, 112, 0)"
    assert style.get("bonus", ("rgb(30, 79, 216)",))[0] == "rgb(30, 79, 216)"
