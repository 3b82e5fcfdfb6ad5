"""``specdec serve`` is fair by default (issue 51): requests start round-robin across clients, so a
client holding 200 queued requests delays another client's first one by at most one of its own;
each client's queued + running requests and its ``n`` are capped (WebSocket ``too_many``, HTTP 429
with ``Retry-After``; ``n`` above the cap a 400 naming ``n``); a queued WebSocket request hears its
position (``queued``); a request that cannot start within ``max_wait_s`` (at once when the queue's
estimate says it would not) is refused with a retry time (WebSocket ``queue_timeout`` +
``retry_after_s``, HTTP 503 + ``Retry-After``), never left silent. The queue order itself is
tested on handles with no server; everything else end to end on loopback."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from specdec.core.config import GenerateSpec
from specdec.server.ws_protocol import Limits
from specdec.serving.backend import Handle, Request
from specdec.serving.fair import FairQueue
from tests.serve_helpers import TIMEOUT_S, TOKEN, ServerThread, client, generate, recv, send, until_done

openai = pytest.importorskip("openai", reason="the openai client comes with the test extras (pip install -e .[test])")
LONG = "import os\n"  # greedy decoding runs past 300 tokens without EOS


# -- the order (pure) ------------------------------------------------------------------------------
def _handle(client: str, i: int) -> Handle:
    return Handle(Request("x", GenerateSpec(), id=f"{client}{i}", client=client))


def test_one_client_is_first_come_first_served() -> None:
    q = FairQueue()
    handles = [_handle("a", i) for i in range(5)]
    for h in handles:
        q.append(h)
    assert [q.position(h) for h in handles] == [1, 2, 3, 4, 5]
    assert [q.popleft() for _ in range(5)] == handles and not q


def test_a_greedy_client_delays_a_newcomer_by_one_request_at_most() -> None:
    q = FairQueue()
    greedy = [_handle("a", i) for i in range(200)]
    for h in greedy:
        q.append(h)
    first = q.popleft()  # a0 starts
    late = _handle("b", 0)
    q.append(late)
    assert first is greedy[0] and q.position(late) == 1  # a0 started this round: b0 is next
    assert [q.popleft().request.id for _ in range(4)] == ["b0", "a1", "a2", "a3"]
    q.remove(greedy[4])
    q.append(b1 := _handle("b", 1))  # b had nothing queued: it starts from the current round again
    assert q.position(b1) <= 2 and len(q) == 196


# -- end to end ------------------------------------------------------------------------------------
def test_a_client_holding_200_requests_cannot_delay_another_clients_first(engine) -> None:
    limits = Limits(max_queue=256, max_per_client=256, max_wait_s=TIMEOUT_S * 4)
    with ServerThread(engine, limits) as srv:
        greedy = client(srv.url)
        generate(greedy, "a0", LONG, method="none", max_new_tokens=60)
        assert recv(greedy)["type"] == "start"
        for i in range(1, 200):
            generate(greedy, f"a{i}", "x = ", method="none", max_new_tokens=6)
        with client(srv.url) as other:
            generate(other, "b", "def f(x):", method="none", max_new_tokens=6)
            msgs = until_done(other, "b", queued=True)
        for notice in [m for m in msgs if m["type"] == "queued"]:  # none if it started within 0.5 s
            assert notice["position"] <= 2, notice  # this round: at most a's next, then b
        assert [m["type"] for m in msgs if m["type"] != "queued"][0] == "start" and msgs[-1]["type"] == "done"
        srv.finished("b")  # its record is kept just after its done is sent
        order = [job.id for job in srv.server.backend.finished]
        # after what ran when b came (a0, maybe a1) and at most one more of a's (the same round), not 199
        assert order.index("b") <= 3, order[:10]
        greedy.close()  # cancels the rest of a's backlog


def test_a_connection_has_a_cap_and_a_queued_request_hears_its_position(engine) -> None:
    with ServerThread(engine, Limits(max_per_client=2)) as srv, client(srv.url) as ws:
        generate(ws, "run", LONG, method="none", max_new_tokens=400)
        assert recv(ws)["type"] == "start"
        generate(ws, "wait", LONG, method="none", max_new_tokens=4)
        generate(ws, "third", LONG, method="none", max_new_tokens=4)
        seen = {}
        while "third" not in seen or "wait" not in seen:
            msg = recv(ws, queued=True)
            if msg["type"] in ("queued", "error"):
                seen[msg["id"]] = msg
        assert seen["third"]["code"] == "too_many" and seen["third"]["retry_after_s"] >= 1
        assert seen["wait"] == {"type": "queued", "id": "wait", "position": 1, "estimate_s": None}
        with client(srv.url) as other:  # another connection is another client
            generate(other, "x", "x = ", method="none", max_new_tokens=2)
            assert recv(other, queued=True)["type"] == "queued"
            send(ws, type="cancel", id="run")
            assert until_done(other, "x")[-1]["type"] == "done"


def test_a_request_that_cannot_start_in_time_is_refused_with_a_retry_time(engine) -> None:
    limits = Limits(max_wait_s=0.5, max_prompt_tokens=100, max_new_tokens=400)
    with ServerThread(engine, limits, http=True) as srv, client(srv.url) as ws:
        generate(ws, "run", LONG, method="none", max_new_tokens=500)  # busy for seconds: both others must wait
        assert recv(ws)["type"] == "start"
        t0 = time.monotonic()
        generate(ws, "wait", LONG, method="none", max_new_tokens=4)
        while (msg := recv(ws, queued=True))["id"] != "wait" or msg["type"] == "queued":
            pass
        assert msg["type"] == "error" and msg["code"] == "queue_timeout" and msg["retry_after_s"] >= 1, msg
        assert 0.4 < time.monotonic() - t0 < 20
        body = json.dumps({"model": "specdec", "prompt": "x = 1", "max_tokens": 2}).encode()
        req = urllib.request.Request(srv.http_url + "/completions", body, {"Authorization": f"Bearer {TOKEN}"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=TIMEOUT_S)
        assert e.value.code == 503 and int(e.value.headers["Retry-After"]) >= 1
        assert json.load(e.value)["error"]["code"] == "queue_timeout"
        assert srv.server.backend.queued == 0  # the refused ones never run
        send(ws, type="cancel", id="run")
        assert until_done(ws, "run")[-1]["stop"] == "cancelled"


def test_a_request_the_queue_says_would_wait_too_long_is_refused_at_once(engine) -> None:
    limits = Limits(max_wait_s=0.3, max_prompt_tokens=100, max_new_tokens=400)
    with ServerThread(engine, limits) as srv, client(srv.url) as ws:
        generate(ws, "history", LONG, method="none", max_new_tokens=120)  # teaches the wait estimate (> 0.3 s)
        assert until_done(ws, "history", timeout=TIMEOUT_S * 4)[-1]["tokens"] == 120
        srv.finished("history")
        generate(ws, "run", LONG, method="none", max_new_tokens=400)
        assert recv(ws)["type"] == "start"
        t0 = time.monotonic()
        generate(ws, "late", LONG, method="none", max_new_tokens=4)
        while (msg := recv(ws, queued=True))["id"] != "late":
            pass
        assert msg["type"] == "error" and msg["code"] == "queue_timeout" and "would wait" in msg["message"], msg
        assert time.monotonic() - t0 < 5  # at once, not after the bound (the message says which path)
        assert msg["retry_after_s"] >= 1 and srv.server.backend.queued == 0
        send(ws, type="cancel", id="run")
        assert until_done(ws, "run")[-1]["stop"] == "cancelled"


def test_http_clients_are_capped_per_key_and_n_is_bounded(engine) -> None:
    limits = Limits(max_per_client=2, max_prompt_tokens=100, max_new_tokens=400, max_wait_s=TIMEOUT_S * 4)
    with ServerThread(engine, limits, token=None, allow_origins=(), http=True) as srv:

        def api(key: str):
            return openai.OpenAI(base_url=srv.http_url, api_key=key, max_retries=0, timeout=TIMEOUT_S * 2)

        with pytest.raises(openai.BadRequestError) as e:
            api("a").completions.create(model="specdec", prompt="x", max_tokens=2, n=3)
        assert e.value.body["param"] == "n" and "at most 2" in e.value.body["message"]
        hold = [
            threading.Thread(
                target=api("a").completions.create,
                kwargs={"model": "specdec", "prompt": LONG, "max_tokens": 300, "temperature": 0},
            )
            for _ in range(2)
        ]
        for t in hold:
            t.start()
        deadline = time.monotonic() + TIMEOUT_S
        while srv.http.tenants._counts.get(next(iter(srv.http.tenants._counts), ""), 0) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with pytest.raises(openai.RateLimitError) as e:
            api("a").completions.create(model="specdec", prompt="x", max_tokens=2)
        assert e.value.body["code"] == "too_many" and int(e.value.response.headers["Retry-After"]) >= 1
        r = api("b").completions.create(model="specdec", prompt="x = 1", max_tokens=2, temperature=0)
        assert r.choices[0].finish_reason == "length"  # another key: another client
        for t in hold:
            t.join(TIMEOUT_S * 2)
