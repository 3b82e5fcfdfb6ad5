"""``stop``, ``n``, ``seed``, ``echo`` and ``logprobs`` on our ``/v1/completions``, each with the
official ``openai`` client and with raw HTTP (streaming and not): the stop text cut as OpenAI cuts
it (not included, ``finish_reason: "stop"``, never half of it in a chunk), ``n`` independent samples
(sample i is the request seeded ``seed + i``, as vLLM seeds them), ``echo`` the prompt first, and
``logprobs`` the target's own log-probabilities (the chosen token's, and the top alternatives)."""

from __future__ import annotations

import json
import math
import urllib.request

import pytest

from specdec.server.openai_api import OpenAIServer
from specdec.server.openai_options import StopCut
from specdec.server.ws_protocol import Limits
from specdec.serving.local import LocalBackend

openai = pytest.importorskip("openai", reason="the openai client comes with the test extras (pip install -e .[test])")
LIMITS = Limits(max_message_bytes=32768, max_prompt_tokens=440, max_new_tokens=64, max_queue=16)


@pytest.fixture(scope="module")
def api(engine):
    backend = LocalBackend(engine, LIMITS.max_queue)
    srv = OpenAIServer(backend, LIMITS).start()
    yield srv
    srv.stop()
    backend.shutdown(10)


@pytest.fixture(scope="module")
def client(api):
    return openai.OpenAI(base_url=api.url + "/v1", api_key="none", max_retries=0, timeout=120)


def raw(api, body: dict) -> dict | list[dict]:
    """POST /v1/completions over plain HTTP: the JSON reply, or a stream's chunks."""
    req = urllib.request.Request(api.url + "/v1/completions", json.dumps({"model": "specdec"} | body).encode())
    with urllib.request.urlopen(req, timeout=120) as resp:
        if not body.get("stream"):
            return json.load(resp)
        lines = [ln[6:] for ln in resp.read().decode().split("\n\n") if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(ln) for ln in lines[:-1]]


def greedy(client, prompt: str, n: int) -> str:
    return client.completions.create(model="specdec", prompt=prompt, max_tokens=n, temperature=0).choices[0].text


def test_stop_cut_holds_back_what_may_begin_a_stop_string() -> None:
    cut = StopCut(("END", "\n\n"))
    assert [cut.feed(t) for t in ("aE", "N", "x E", "ND!")] == [("a", False), ("", False), ("ENx ", False), ("", True)]
    cut = StopCut(("END",))
    assert cut.feed("ab EN") == ("ab ", False) and cut.flush() == "EN"


@pytest.mark.parametrize("as_list", [False, True])
def test_stop_is_cut_as_openai_cuts_it(client, api, prompts, as_list) -> None:
    prompt = prompts[3][-300:]
    full = greedy(client, prompt, 40)
    stop = full[12:15]
    expected = full[: full.find(stop)]
    stops = [stop, "never-there"] if as_list else stop
    base = {"prompt": prompt, "max_tokens": 40, "temperature": 0, "stop": stops}
    r = client.completions.create(model="specdec", **base)
    assert r.choices[0].text == expected and r.choices[0].finish_reason == "stop"
    assert r.choices[0].model_extra["stop_reason"] == stop  # vLLM's field: which stop string
    chunks = list(client.completions.create(model="specdec", stream=True, **base))
    assert "".join(c.choices[0].text for c in chunks) == expected
    assert chunks[-1].choices[0].finish_reason == "stop"
    got = raw(api, base)
    assert got["choices"][0]["text"] == expected and got["choices"][0]["finish_reason"] == "stop"
    streamed = raw(api, base | {"stream": True})
    assert "".join(c["choices"][0]["text"] for c in streamed) == expected
    ids = [t for c in streamed for t in c["choices"][0]["token_ids"]]
    assert ids == got["choices"][0]["token_ids"] and len(ids) == got["usage"]["completion_tokens"]
    through = client.completions.create(model="specdec", prompt=prompt, max_tokens=len(ids), temperature=0)
    assert stop in through.choices[0].text  # the tokens run through the stop string, as vLLM counts them


def test_n_samples_are_the_requests_seeded_seed_plus_i(client, api, prompts) -> None:
    prompt = prompts[4][-200:]
    base = {"prompt": prompt, "max_tokens": 12, "temperature": 1.0, "seed": 11, "extra_body": {"specdec": {"k": 3}}}
    r = client.completions.create(model="specdec", n=3, **base)
    assert [c.index for c in r.choices] == [0, 1, 2]
    singles = [client.completions.create(model="specdec", **(base | {"seed": 11 + i})).choices[0] for i in range(3)]
    assert [c.text for c in r.choices] == [c.text for c in singles]
    assert len({c.text for c in r.choices}) > 1  # independent samples
    assert r.usage.completion_tokens == sum(len(c.model_extra["token_ids"]) for c in r.choices)
    body = {k: v for k, v in base.items() if k != "extra_body"} | {"specdec": {"k": 3}, "n": 3, "stream": True}
    texts = ["", "", ""]
    for ch in raw(api, body):
        texts[ch["choices"][0]["index"]] += ch["choices"][0]["text"]
    assert texts == [c.text for c in singles]


def test_the_same_seed_gives_the_same_sample(client, prompts) -> None:
    kw = {"model": "specdec", "prompt": prompts[5][-200:], "max_tokens": 10, "temperature": 1.0, "seed": 3}
    kw["extra_body"] = {"specdec": {"method": "none"}}
    a, b = (client.completions.create(**kw).choices[0].text for _ in range(2))
    assert a == b


def test_echo_sends_the_prompt_first(client, api, prompts) -> None:
    prompt = prompts[6][-150:]
    full = greedy(client, prompt, 8)
    r = client.completions.create(model="specdec", prompt=prompt, max_tokens=8, temperature=0, echo=True)
    assert r.choices[0].text == prompt + full
    chunks = raw(api, {"prompt": prompt, "max_tokens": 8, "temperature": 0, "echo": True, "stream": True})
    assert chunks[0]["choices"][0]["text"] == prompt
    assert "".join(c["choices"][0]["text"] for c in chunks) == prompt + full


def test_logprobs_are_the_targets_own(client, api, prompts) -> None:
    prompt = prompts[7][-200:]
    r = client.completions.create(model="specdec", prompt=prompt, max_tokens=10, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    assert "".join(lp.tokens) == r.choices[0].text and len(lp.tokens) == len(r.choices[0].model_extra["token_ids"])
    for chosen, top in zip(lp.token_logprobs, lp.top_logprobs):
        values = sorted(top.values(), reverse=True)
        assert len(top) <= 3 and chosen <= 0 and math.isclose(chosen, values[0], abs_tol=1e-5)  # greedy: the top
        assert sum(math.exp(v) for v in values) <= 1 + 1e-5
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
    streamed = raw(api, {"prompt": prompt, "max_tokens": 10, "temperature": 0, "logprobs": 0, "stream": True})
    lps = [x for c in streamed for x in c["choices"][0]["logprobs"]["token_logprobs"]]
    assert lps == pytest.approx(lp.token_logprobs, abs=1e-5)
    assert all(c["choices"][0]["logprobs"]["top_logprobs"] is None for c in streamed)
