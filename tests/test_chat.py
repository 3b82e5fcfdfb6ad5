"""Chat end to end on a real chat model (SmolLM2-135M-Instruct, ChatML template): the official
``openai`` client against a real ``specdec serve`` process (``/v1/chat/completions``, streaming and
not), a second turn decoded exactly as plain decoding of the same rendered prompt, bad messages
refused with a 400 naming the parameter while the server keeps serving, WebSocket ``generate``
with ``messages``, and ``specdec chat`` fed from a pipe. Skipped when the model is not installed
(``specdec models fetch smollm2-135m``). One server process for the module: loading takes ~20 s."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.serve_helpers import check_stream, client, generate, recv, send, until_done

openai = pytest.importorskip("openai", reason="the openai client comes with the test extras (pip install -e .[test])")
N = 48  # reply length cap: SmolLM2 ends these turns (eos) well before it
HI = [{"role": "user", "content": "Hi"}]
SUM = "What is 2+2?"
ENV = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))


def smollm2_dir() -> Path | None:
    """The installed SmolLM2 folder: in the cache the tests use, else the user's (conftest points
    ``SPECDEC_CACHE`` at a fresh folder for calibration, not for models)."""
    from specdec.catalog import known, store

    model = known.get("smollm2-135m")
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specdec" / "models" / model.name
    for folder in (store.hf_dir(model), home / "hf"):
        if (folder / "config.json").is_file():
            return folder
    return None


SMOL = smollm2_dir()
pytestmark = pytest.mark.skipif(SMOL is None, reason="SmolLM2 is not installed: specdec models fetch smollm2-135m")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A real ``specdec serve`` on SmolLM2: (WebSocket URL, OpenAI base URL)."""
    log = (tmp_path_factory.mktemp("serve") / "stderr.log").open("w")
    cmd = [sys.executable, "-m", "specdec", "serve", "--target", str(SMOL), "--port", "0", "--max-new-tokens", "64"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=ENV)
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        urls = [re.search(r"(ws|http)://\S+", line) for line in lines]
        assert all(urls), f"specdec serve did not start: {lines}"
        yield urls[0].group(0), urls[1].group(0)
    finally:
        proc.terminate()
        assert proc.wait(60) == 0
        log.close()


@pytest.fixture(scope="module")
def api(served):
    return openai.OpenAI(base_url=served[1], api_key="none", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(SMOL)


def chat(api, messages, method: str = "lookup", **kw):
    """A greedy chat completion; ``max_completion_tokens`` N unless the call names a length."""
    if "max_tokens" not in kw:
        kw.setdefault("max_completion_tokens", N)
    extra = {"specdec": {"method": method}}
    kw.setdefault("temperature", 0)
    return api.chat.completions.create(model="specdec", messages=messages, extra_body=extra, **kw)


def test_chat_completion_is_the_reply_without_template_or_eos(api, tokenizer) -> None:
    r = chat(api, HI)
    (choice,) = r.choices
    ids = choice.model_extra["token_ids"]
    assert r.object == "chat.completion" and choice.message.role == "assistant"
    assert choice.finish_reason == "stop" and ids[-1] == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert choice.message.content == tokenizer.decode(ids, skip_special_tokens=True)
    assert choice.message.content.strip() and "<|im" not in choice.message.content
    assert r.usage.completion_tokens == len(ids) and r.usage.prompt_tokens > 10
    steps = r.model_extra["specdec"]["steps"]
    assert [pc["token_id"] for st in steps for pc in st["pieces"] if pc["kind"] != "rejected"] == ids
    short = chat(api, HI, max_tokens=3)  # the older length field; the reply is cut
    assert short.choices[0].finish_reason == "length" and len(short.choices[0].model_extra["token_ids"]) == 3


def test_streamed_chat_is_the_same_reply_in_chunks(api) -> None:
    whole = chat(api, HI).choices[0].message.content
    chunks = list(chat(api, HI, stream=True))
    assert chunks[0].object == "chat.completion.chunk" and chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].choices[0].delta.content == ""  # as OpenAI and vLLM: a string, never None (issue 53)
    assert all(isinstance(ch.choices[0].delta.content, str) for ch in chunks[:-1])
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == whole  # choices[0] on every chunk
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(ch.choices[0].finish_reason is None for ch in chunks[:-1])
    assert all("step" in ch.model_extra["specdec"] for ch in chunks[1:])  # every step's fates
    counted = list(chat(api, HI, stream=True, stream_options={"include_usage": True}))
    tokens = sum(len(ch.choices[0].model_extra["token_ids"]) for ch in chunks[1:])  # after the role chunk
    assert counted[-1].choices == [] and counted[-1].usage.completion_tokens == tokens


def test_second_turn_decodes_exactly_as_plain_decoding_of_its_prompt(api, tokenizer) -> None:
    from specdec.engine.chat import render

    first = chat(api, HI).choices[0].message.content
    messages = HI + [{"role": "assistant", "content": first}, {"role": "user", "content": SUM}]
    second = chat(api, messages)
    prompt = render(tokenizer, messages)
    extra = {"specdec": {"method": "none"}}
    plain = api.completions.create(model="specdec", prompt=prompt, max_tokens=N, temperature=0, extra_body=extra)
    assert second.choices[0].model_extra["token_ids"] == plain.choices[0].model_extra["token_ids"]
    assert second.usage.prompt_tokens == plain.usage.prompt_tokens
    assert second.choices[0].message.content == plain.choices[0].text and "4" in plain.choices[0].text


BAD = [
    ({"messages": None}, "messages", "bad_params"),
    ({"messages": []}, "messages", "bad_params"),
    ({"messages": [{"role": "bot", "content": "x"}]}, "messages", "bad_params"),
    ({"messages": [{"role": "user", "content": 7}]}, "messages", "bad_params"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "bad_params"),
    ({"logprobs": 3}, "logprobs", "bad_params"),
    ({"top_logprobs": 2}, "top_logprobs", "bad_params"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs", "bad_params"),
    ({"n": 0}, "n", "bad_params"),
    ({"echo": True}, "echo", "bad_params"),
    ({"max_completion_tokens": 0}, "max_completion_tokens", "bad_params"),
    ({"temperature": 3}, "temperature", "bad_params"),
    ({"specdec": {"method": "beam"}}, "method", "unknown_method"),
]


@pytest.mark.parametrize("body,param,code", BAD)
def test_bad_chat_request_is_a_400_naming_the_param(served, api, body, param, code) -> None:
    body = {"model": "specdec", "messages": HI} | body
    req = urllib.request.Request(served[1] + "/chat/completions", json.dumps(body).encode())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=60)
    err = json.load(e.value)["error"]
    assert e.value.code == 400 and (err["param"], err["code"]) == (param, code) and err["message"]
    assert chat(api, HI, max_tokens=2).choices[0].message.content  # still serving


def test_no_op_values_are_accepted(api) -> None:
    r = chat(api, HI, max_tokens=2, n=1, stop=None, logprobs=False, frequency_penalty=0, tools=[], user="u")
    assert len(r.choices[0].model_extra["token_ids"]) == 2


def test_websocket_generate_with_messages(served, api) -> None:
    want = chat(api, HI).choices[0].message.content
    with client(served[0], token=None) as ws:
        send(ws, type="generate", id="bad", messages=[{"role": "user"}])
        assert recv(ws) | {"message": ""} == {"type": "error", "id": "bad", "code": "bad_params", "message": ""}
        send(ws, type="generate", id="both", messages=HI, prompt="x")
        assert recv(ws)["code"] == "bad_params"
        send(ws, type="generate", id="c", messages=HI, method="lookup", max_new_tokens=N)
        text, _ = check_stream(until_done(ws, "c"))
        assert text == want
        generate(ws, "p", "def f(x):", max_new_tokens=4)  # a prompt still works on the same connection
        assert until_done(ws, "p")[-1]["type"] == "done"


def test_specdec_chat_piped_answers_each_line(api) -> None:
    first = chat(api, HI).choices[0].message.content
    messages = HI + [{"role": "assistant", "content": first}, {"role": "user", "content": SUM}]
    second = chat(api, messages).choices[0].message.content
    cmd = [sys.executable, "-m", "specdec", "chat", "--target", str(SMOL), "--method", "lookup"]
    out = subprocess.run(
        cmd + ["--max-new-tokens", str(N)], input=f"Hi\n\n{SUM}\n", capture_output=True, text=True, env=ENV, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{first}\n{second}\n"  # piped: no colour codes, no prompts
    assert len(re.findall(r"^\[lookup k auto\] tokens \d+ .* tau [\d.]+ .* tok/s", out.stderr, re.M)) == 2


def test_chat_stop_n_and_logprobs_with_the_official_client(api) -> None:
    full = chat(api, HI).choices[0].message.content
    stop = full.split()[2]
    r = chat(api, HI, stop=[stop])
    assert r.choices[0].message.content == full[: full.find(stop)] and r.choices[0].finish_reason == "stop"
    r = chat(api, HI, max_tokens=6, logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert "".join(t.token for t in content) == r.choices[0].message.content and len(content) == 6
    assert all(len(t.top_logprobs) == 2 and t.logprob == pytest.approx(t.top_logprobs[0].logprob) for t in content)
    assert all(bytes(t.bytes).decode() == t.token for t in content)
    r = chat(api, HI, max_tokens=6, n=2, temperature=1.0, seed=4)
    assert [c.index for c in r.choices] == [0, 1] and all(c.message.content for c in r.choices)
    chunks = list(chat(api, HI, max_tokens=4, n=2, stream=True))
    assert {c.choices[0].index for c in chunks} == {0, 1}
    ends = [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason]
    assert ends == ["length", "length"]
