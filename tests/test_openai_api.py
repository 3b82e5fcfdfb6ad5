"""Our /v1/completions with the official ``openai`` client: greedy tokens identical to the engine's
plain decoding, streaming and not, every token's fate in the ``specdec`` extension, and each bad
input a proper HTTP error (OpenAI error object, right status) with the server still serving."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import replace

import pytest

from specdec.core.config import GenerateSpec
from specdec.core.events import EMITTED_KINDS
from specdec.server.openai_api import OpenAIServer
from specdec.server.ws_protocol import Limits
from specdec.serving.local import LocalBackend

openai = pytest.importorskip("openai", reason="the openai client comes with the test extras (pip install -e .[test])")
TOKEN = "t0ken"
LIMITS = Limits(max_message_bytes=32768, max_prompt_tokens=440, max_new_tokens=64, max_queue=4)


@pytest.fixture(scope="module")
def api(engine):
    backend = LocalBackend(engine, LIMITS.max_queue)
    srv = OpenAIServer(backend, replace(LIMITS, context=engine.context), token=TOKEN).start()
    yield srv
    srv.stop()
    backend.shutdown(10)


@pytest.fixture(scope="module")
def client(api):
    return openai.OpenAI(base_url=api.url + "/v1", api_key=TOKEN, max_retries=0, timeout=120)


def plain(engine, prompt: str, n: int) -> list[int]:
    return engine.generate(prompt, GenerateSpec(method="none", max_new_tokens=n)).tokens


@pytest.mark.parametrize("method", ["draft", "lookup", "medusa", "eagle"])
def test_non_streaming_greedy_is_plain_decoding(client, engine, prompts, method) -> None:
    prompt = prompts[0]
    r = client.completions.create(
        model="specdec", prompt=prompt, max_tokens=24, temperature=0, extra_body={"specdec": {"method": method}}
    )
    choice = r.choices[0]
    ids = choice.model_extra["token_ids"]
    assert ids == plain(engine, prompt, 24)
    assert choice.text == engine.tokenizer.decode(ids, skip_special_tokens=True)
    assert choice.finish_reason in ("stop", "length") and r.usage.completion_tokens == len(ids)
    fates = r.model_extra["specdec"]
    emitted = [pc["token_id"] for st in fates["steps"] for pc in st["pieces"] if pc["kind"] in EMITTED_KINDS]
    assert emitted == ids and fates["stats"]["emitted"] == len(ids)


def test_streaming_chunks_are_steps_with_fates(client, engine, prompts) -> None:
    prompt = prompts[1]
    stream = client.completions.create(
        model="specdec",
        prompt=prompt,
        max_tokens=32,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"specdec": {"method": "draft", "k": 4}},
    )
    chunks = list(stream)
    steps = [c for c in chunks if c.choices]
    ids = [t for c in steps for t in c.choices[0].model_extra["token_ids"]]
    assert ids == plain(engine, prompt, 32)
    assert "".join(c.choices[0].text for c in steps) == engine.tokenizer.decode(ids, skip_special_tokens=True)
    kinds = {pc["kind"] for c in steps for pc in c.model_extra["specdec"]["step"]["pieces"]}
    assert "accepted" in kinds and kinds <= {"accepted", "rejected", "recovered", "bonus", "plain"}
    assert steps[-1].choices[0].finish_reason in ("stop", "length")
    assert all(c.choices[0].finish_reason is None for c in steps[:-1])
    assert chunks[-1].usage.completion_tokens == len(ids) and chunks[-1].usage.prompt_tokens > 0


def test_models_lists_methods(client) -> None:
    (model,) = client.models.list().data
    assert model.id == "specdec" and set(model.model_extra["specdec"]["methods"]) >= {"none", "draft", "lookup"}


def _raw(api, body: bytes | None, token: str | None = TOKEN, path: str = "/v1/completions") -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    req = urllib.request.Request(api.url + path, body, headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


BAD = [
    ({"model": "gpt-4", "prompt": "x"}, 404, "model_not_found"),
    ({"model": "specdec", "prompt": "x", "specdec": {"method": "beam"}}, 400, "unknown_method"),
    ({"model": "specdec", "prompt": "x", "temperature": -1}, 400, "bad_params"),
    ({"model": "specdec", "prompt": "x", "max_tokens": 10_000}, 400, "bad_params"),
    ({"model": "specdec", "prompt": "x", "n": 0}, 400, "bad_params"),
    ({"model": "specdec", "prompt": "x", "frobnicate": 1}, 400, "bad_params"),
    ({"model": "specdec", "prompt": ""}, 400, "bad_params"),
    ({"model": "specdec", "prompt": "x = 1\n" * 300}, 400, "prompt_too_long"),
    ({"model": "specdec", "prompt": [1, 2, 10**9]}, 400, "bad_params"),
]


@pytest.mark.parametrize("body,status,code", BAD)
def test_bad_request_is_an_http_error(api, client, body, status, code) -> None:
    got, err = _raw(api, json.dumps(body).encode())
    if code == "prompt_too_long":  # vLLM's shape: clients match its type and message
        assert got == 400 and err["error"]["code"] == 400 and err["error"]["type"] == "BadRequestError"
        assert "maximum context length" in err["error"]["message"] and err["error"]["param"] == "prompt"
    else:
        assert got == status and err["error"]["code"] == code and err["error"]["message"]
    r = client.completions.create(model="specdec", prompt="def f(x):", max_tokens=4, temperature=0)
    assert len(r.choices[0].model_extra["token_ids"]) >= 1  # still serving


def test_chat_on_a_model_without_a_chat_template_is_a_clear_400(api, client) -> None:
    body = {"model": "specdec", "messages": [{"role": "user", "content": "Hi"}]}
    status, err = _raw(api, json.dumps(body).encode(), path="/v1/chat/completions")
    assert status == 400 and (err["error"]["code"], err["error"]["param"]) == ("no_chat_template", "messages")
    assert "chat template" in err["error"]["message"]
    with pytest.raises(openai.BadRequestError, match="chat template"):
        client.chat.completions.create(model="specdec", messages=body["messages"], max_tokens=2)
    assert client.models.list().data[0].model_extra["specdec"]["chat"] is False


@pytest.mark.parametrize("length", ["-1", "abc"])
def test_a_bad_content_length_is_a_400_not_a_hang(api, length) -> None:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=30)
    conn.putrequest("POST", "/v1/completions")
    for name, value in (("Content-Length", length), ("Authorization", f"Bearer {TOKEN}")):
        conn.putheader(name, value)
    conn.endheaders()
    r = conn.getresponse()
    assert r.status == 400 and json.load(r)["error"]["code"] == "bad_message"
    conn.close()


def test_unknown_routes_are_openai_404s(api) -> None:
    for body, path in ((None, "/v1/nothing"), (b"{}", "/v1/embeddings")):
        status, err = _raw(api, body, path=path)
        assert status == 404 and err["error"]["code"] == "not_found" and path in err["error"]["message"]
        assert err["error"]["type"] == "invalid_request_error"


def test_malformed_json_oversize_and_auth(api, client) -> None:
    assert _raw(api, b'{"model": "specdec", "prompt": ')[0] == 400
    assert _raw(api, b'{"model": "specdec", "prompt": "' + b"x" * 40000 + b'"}')[0] == 413
    assert _raw(api, b"{}", token=None)[0] == 401
    assert _raw(api, b"{}", token="wrong")[0] == 401
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=api.url + "/v1", api_key="wrong", max_retries=0).completions.create(
            model="specdec", prompt="x", max_tokens=2
        )
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="x", max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.completions.create(model="specdec", prompt="x", max_tokens=2, temperature=500)
    r = client.completions.create(model="specdec", prompt="import os\n", max_tokens=3, temperature=0)
    assert r.choices[0].model_extra["token_ids"]


# -- issue 32, item 1: a stream without include_usage never ends with an empty-choices chunk -------------


def _sse(api, body: dict) -> list[dict]:
    """The ``data:`` chunks of a raw streaming request, up to ``[DONE]`` (which must come)."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
    req = urllib.request.Request(api.url + "/v1/completions", json.dumps(body).encode(), headers)
    chunks = []
    with urllib.request.urlopen(req, timeout=60) as r:
        for line in r:
            if line.startswith(b"data: [DONE]"):
                return chunks
            if line.startswith(b"data: "):
                chunks.append(json.loads(line[6:]))
    raise AssertionError("the stream ended without data: [DONE]")


def test_the_usual_client_loop_reads_choices_0_of_every_chunk(client, engine, prompts) -> None:
    stream = client.completions.create(model="specdec", prompt=prompts[0], max_tokens=12, temperature=0, stream=True)
    chunks = list(stream)
    text = "".join(ch.choices[0].text for ch in chunks)  # IndexError before the fix
    ids = plain(engine, prompts[0], 12)
    assert text == engine.tokenizer.decode(ids, skip_special_tokens=True)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length") and chunks[-1].usage is None
    assert all(ch.choices[0].finish_reason is None for ch in chunks[:-1])


def test_raw_streams_send_the_empty_choices_usage_chunk_only_when_asked(api, engine, prompts) -> None:
    body = {"model": "specdec", "prompt": prompts[2], "max_tokens": 8, "temperature": 0, "stream": True}
    plain_chunks = _sse(api, body)
    assert plain_chunks and all(len(c["choices"]) == 1 for c in plain_chunks)
    assert all(c.get("usage") is None for c in plain_chunks)
    last = plain_chunks[-1]
    assert last["choices"][0]["finish_reason"] == "length" and last["specdec"]["stats"]["emitted"] == 8
    asked = _sse(api, body | {"stream_options": {"include_usage": True}})
    assert asked[-1]["choices"] == [] and asked[-1]["usage"]["completion_tokens"] == 8
    assert all(len(c["choices"]) == 1 for c in asked[:-1])
    assert [t for c in asked[:-1] for t in c["choices"][0]["token_ids"]] == plain(engine, prompts[2], 8)


def test_a_choice_that_no_step_finished_gets_its_finish_reason(engine, prompts) -> None:
    from specdec.core.config import GenerateSpec as Spec
    from specdec.server import openai_protocol as oa
    from specdec.server import openai_replies as replies
    from specdec.server.openai_choices import ChoiceRun
    from specdec.server.openai_options import Options
    from specdec.serving.backend import Request

    backend = LocalBackend(engine, 2)
    try:
        for chat in (False, True):
            req = oa.Completion("x", [1, 2], Spec(), stream=True, include_usage=False, chat=chat)
            handle = backend.submit(Request(engine.encode(prompts[0]), Spec(method="none", max_new_tokens=200)))
            run = ChoiceRun(0, handle, Options(), backend.cancel)
            parts = run.parts()
            next(parts)
            backend.cancel(handle)  # as a disconnect or a shutdown ends it
            last = replies.chunk(req, run, list(parts)[-1])["choices"][0]
            assert last["finish_reason"] == "abort" and handle.stop == "cancelled"
            assert last.get("text", "") == "" and last.get("delta", {}) == {}
    finally:
        backend.shutdown(10)


# -- issue 32, item 2: no-op values accepted, real ones refused naming the parameter, OpenAI's ranges -----

NO_OPS = {"frequency_penalty": 0, "presence_penalty": 0.0, "logit_bias": {}, "best_of": 1, "n": 1}


def test_clients_that_always_send_defaults_are_served(api, engine, prompts) -> None:
    body = {"model": "specdec", "prompt": prompts[0], "max_tokens": 6, "temperature": 0} | NO_OPS
    status, r = _raw(api, json.dumps(body).encode())
    assert status == 200 and r["choices"][0]["token_ids"] == plain(engine, prompts[0], 6)
    status, r = _raw(api, json.dumps(body | dict.fromkeys(NO_OPS)).encode())  # nulls as well
    assert status == 200


REFUSED = [
    ({"frequency_penalty": 0.5}, "frequency_penalty"),
    ({"presence_penalty": -1}, "presence_penalty"),
    ({"logit_bias": {"42": 100}}, "logit_bias"),
    ({"best_of": 2}, "best_of"),
    ({"n": 0}, "n"),
    ({"n": 129}, "n"),
    ({"n": True}, "n"),
    ({"stop": ""}, "stop"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"stop": 3}, "stop"),
    ({"echo": 1}, "echo"),
    ({"logprobs": 6}, "logprobs"),
    ({"logprobs": True}, "logprobs"),
    ({"echo": True, "logprobs": 1}, "logprobs"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": -3}, "max_tokens"),
    ({"max_tokens": "8"}, "max_tokens"),
    ({"max_tokens": 10_000}, "max_tokens"),
    ({"temperature": 99}, "temperature"),
    ({"temperature": 2.01}, "temperature"),
    ({"temperature": -0.1}, "temperature"),
    ({"top_p": 0}, "top_p"),
]


@pytest.mark.parametrize("fields, param", REFUSED)
def test_a_refused_value_is_a_400_naming_its_parameter(api, fields, param) -> None:
    status, err = _raw(api, json.dumps({"model": "specdec", "prompt": "x = 1"} | fields).encode())
    e = err["error"]
    assert status == 400 and e["code"] == "bad_params" and e["type"] == "invalid_request_error"
    assert e["param"] == param and param in e["message"] and "max_new_tokens" not in e["message"]


def test_temperature_2_is_in_openais_range(api) -> None:
    body = {"model": "specdec", "prompt": "x = 1", "max_tokens": 2, "temperature": 2, "seed": 1}
    assert _raw(api, json.dumps(body).encode())[0] == 200
