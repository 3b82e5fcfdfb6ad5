"""Protocol v1 as pure logic: every bad client message maps to its documented error code, good
ones become a validated GenerateSpec; the server messages are JSON with the documented fields;
the CLI's security helpers (loopback warning, token check) decide correctly."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from websockets.datastructures import Headers
from websockets.http11 import Request

from specdec.cli.serve import warnings_for
from specdec.core.events import Piece, Stats, StepEvent
from specdec.server import ws_protocol as proto
from specdec.server.ws_server import authorized

LIMITS = proto.Limits(max_message_bytes=1000, max_prompt_tokens=5, max_new_tokens=50, max_queue=2, context=64)
METHODS = ("none", "draft", "lookup")


def encode(text: str) -> list[int]:  # a stand-in tokenizer: one token per word
    return list(range(len(text.split())))


def parse(raw: str | bytes):
    return proto.parse(raw, LIMITS, METHODS, encode)


def gen(**fields) -> str:
    return json.dumps({"type": "generate", "id": "r", "prompt": "a b c", **fields})


BAD = [
    ("nope", "bad_json", None),
    ('{"type": ', "bad_json", None),
    ("[" * 900 + "]" * 0, "bad_json", None),
    ("[1, 2]", "bad_message", None),
    ('"generate"', "bad_message", None),
    (b'{"type": "generate", "id": "r"}', "bad_message", None),
    ('{"type": "generate", "prompt": "x"}', "bad_message", None),
    ('{"type": "generate", "id": true, "prompt": "x"}', "bad_message", None),
    ('{"type": "generate", "id": 1.5, "prompt": "x"}', "bad_message", None),
    ('{"type": "generate", "id": "", "prompt": "x"}', "bad_message", None),
    ('{"id": "r"}', "bad_message", "r"),
    ('{"type": 3, "id": "r"}', "bad_message", "r"),
    ('{"type": "generat", "id": "r"}', "unknown_type", "r"),
    (gen(method="beam"), "unknown_method", "r"),
    (gen(method="medusa"), "unknown_method", "r"),
    (gen(method=None), "unknown_method", "r"),
    (gen(prompt=""), "bad_params", "r"),
    (gen(prompt=5), "bad_params", "r"),
    (gen(prompt=" "), "bad_params", "r"),
    (gen(foo=1), "bad_params", "r"),
    (gen(sampling={"temperature": 1}), "bad_params", "r"),
    (gen(k=0), "bad_params", "r"),
    (gen(k=17), "bad_params", "r"),
    (gen(k="many"), "bad_params", "r"),
    (gen(k=2.5), "bad_params", "r"),
    (gen(temperature=-1), "bad_params", "r"),
    (gen(temperature="hot"), "bad_params", "r"),
    (gen(top_p=0), "bad_params", "r"),
    (gen(top_p=1.5), "bad_params", "r"),
    (gen(top_k=-1), "bad_params", "r"),
    (gen(seed=-1), "bad_params", "r"),
    (gen(seed=2**64), "bad_params", "r"),
    (gen(seed="x"), "bad_params", "r"),
    (gen(max_new_tokens=0), "bad_params", "r"),
    (gen(max_new_tokens=65), "bad_params", "r"),  # above the context (64); 51 is above the default only
    (gen(max_new_tokens="10"), "bad_params", "r"),
    (gen(confidence=2), "bad_params", "r"),
    (gen(prompt="a b c d e f"), "prompt_too_long", "r"),
    (gen(prompt="x" * 1000), "too_large", None),
]


@pytest.mark.parametrize("raw, code, rid", BAD)
def test_bad_messages_get_their_documented_code(raw, code, rid):
    with pytest.raises(proto.ProtocolError) as e:
        parse(raw)
    assert e.value.code == code, e.value.message
    assert e.value.id == rid
    assert code in proto.ERROR_CODES and e.value.message


def test_a_good_generate_becomes_a_validated_spec():
    msg = parse(gen(method="lookup", k=3, temperature=0.7, top_k=20, top_p=0.9, seed=7, max_new_tokens=50))
    assert isinstance(msg, proto.Generate) and msg.id == "r" and msg.prompt_ids == [0, 1, 2]
    s = msg.spec
    assert (s.method, s.k, s.max_new_tokens) == ("lookup", 3, 50)
    assert (s.sampling.temperature, s.sampling.top_k, s.sampling.top_p, s.sampling.seed) == (0.7, 20, 0.9, 7)


def test_defaults_and_integer_ids():
    msg = parse('{"type": "generate", "id": 42, "prompt": "a"}')
    assert msg.id == 42 and msg.spec.method == "draft" and msg.spec.sampling.greedy
    assert msg.spec.max_new_tokens == 50  # min(128, the server's cap)
    no_draft = proto.parse('{"type": "generate", "id": 1, "prompt": "a"}', LIMITS, ("none", "lookup"), encode)
    assert no_draft.spec.method == "lookup"  # a model with no draft still speculates (GENERATE_ORDER)
    chosen = replace(LIMITS, method="none", k=2)  # specdec serve --method none --k 2
    assert proto.parse('{"type": "generate", "id": 2, "prompt": "a"}', chosen, ("none", "lookup"), encode).spec.k == 2
    named = proto.parse(
        '{"type": "generate", "id": 3, "prompt": "a", "method": "lookup"}', chosen, ("none", "lookup"), encode
    )
    assert (named.spec.method, named.spec.k) == ("lookup", "auto")  # --k goes with the default method only


def test_methods_come_from_the_engine_not_a_fixed_list():
    with pytest.raises(proto.ProtocolError) as e:  # an engine without a draft model offers no 'draft'
        proto.parse(gen(method="draft"), LIMITS, ("none", "lookup"), encode)
    assert e.value.code == "unknown_method" and "none, lookup" in e.value.message


def chat_render(messages) -> str:  # a stand-in template over the real message checks
    from specdec.engine.chat import check

    return " ".join(f"{m['role']}: {m['content']}" for m in check(messages)) + " assistant:"


def test_chat_messages_become_the_rendered_prompt():
    hi = [{"role": "user", "content": "Hi"}]
    msg = json.dumps({"type": "generate", "id": "c", "messages": hi, "method": "lookup"})
    req = proto.parse(msg, LIMITS, METHODS, encode, chat_render)
    assert req.prompt == "user: Hi assistant:" and req.prompt_ids == encode(req.prompt)
    assert req.spec.method == "lookup"
    for messages in ([], "Hi", [{"role": "bot", "content": "x"}], [{"role": "user", "content": 1}]):
        raw = json.dumps({"type": "generate", "id": "c", "messages": messages})
        with pytest.raises(proto.ProtocolError) as e:
            proto.parse(raw, LIMITS, METHODS, encode, chat_render)
        assert (e.value.code, e.value.id) == ("bad_params", "c") and "messages" in e.value.message
    with pytest.raises(proto.ProtocolError, match="not both"):
        proto.parse(gen(messages=hi), LIMITS, METHODS, encode, chat_render)
    with pytest.raises(proto.ProtocolError) as e:  # a server without a chat template
        proto.parse(json.dumps({"type": "generate", "id": 1, "messages": hi}), LIMITS, METHODS, encode)
    assert e.value.code == "no_chat_template"
    assert proto.hello(METHODS, 512, LIMITS, False, chat=True)["chat"] is True


def test_cancel():
    assert parse('{"type": "cancel", "id": "r"}') == proto.Cancel("r")


def test_server_messages_are_json_with_the_documented_fields():
    pieces = (
        Piece(5, "ab", "accepted", 1, 1, 0.9, 0.8),
        Piece(6, "x", "rejected", 1, 2, 0.1, 0.7),
        Piece(7, "c", "recovered", 1, 2),
    )
    ev = StepEvent(1, pieces, Stats(steps=1, emitted=2), {"propose": 1.0, "score": 2.0, "verify": 0.1}, 2)
    step = json.loads(proto.dumps(proto.step("r", ev)))
    assert step["type"] == "step" and step["id"] == "r" and step["text"] == "abc"
    assert [p["kind"] for p in step["pieces"]] == ["accepted", "rejected", "recovered"]
    assert set(step["pieces"][0]) == {"text", "kind", "token_id", "position", "p", "q"}
    assert set(step) >= {"step", "draft_size", "timings_ms", "stats"} and step["stats"]["emitted"] == 2
    done = json.loads(proto.dumps(proto.done("r", "cancelled", "abc", 2, None)))
    assert done["stop"] == "cancelled" and done["stats"]["emitted"] == 0
    err = proto.error(None, "busy", "full")
    assert err == {"type": "error", "id": None, "code": "busy", "message": "full"}
    hello = proto.hello(METHODS, 512, LIMITS, True)
    assert hello["protocol"] == proto.PROTOCOL_VERSION and hello["limits"]["max_queue"] == 2
    with pytest.raises(AssertionError):
        proto.error("r", "no_such_code", "x")


def test_fast_stats_dict_equals_stats_to_dict():
    s = Stats(
        steps=3,
        target_forwards=3,
        drafted=5,
        accepted=3,
        emitted=6,
        elapsed_s=0.2,
        prefill_s=0.01,
        drafted_at=[3, 2],
        tested_at=[3, 1],
        accepted_at=[2, 1],
    )
    assert proto.stats_dict(s) == s.to_dict() and proto.stats_dict(Stats()) == Stats().to_dict()
    assert list(proto.stats_dict(s)) == list(s.to_dict())


def test_non_loopback_without_token_warns():
    assert warnings_for("127.0.0.1", None) == [] and warnings_for("localhost", None) == []
    assert warnings_for("::1", None) == [] and warnings_for("0.0.0.0", "t") == []
    assert "without a token" in warnings_for("0.0.0.0", None)[0]
    assert warnings_for("192.168.1.5", None) and warnings_for("example.org", None)


def _request(path: str = "/", auth: str | None = None) -> Request:
    headers = Headers()
    if auth is not None:
        headers["Authorization"] = auth
    return Request(path, headers)


def test_token_check():
    assert authorized(_request(), None)
    assert not authorized(_request(), "t0k")
    assert not authorized(_request(auth="Bearer nope"), "t0k")
    assert not authorized(_request("/?token=nope"), "t0k")
    assert not authorized(_request(auth="t0k"), "t0k")  # the scheme is required
    assert authorized(_request(auth="Bearer t0k"), "t0k")
    assert authorized(_request(auth="bearer t0k"), "t0k")
    assert authorized(_request("/?token=t0k"), "t0k")
    assert authorized(_request("/stream?x=1&token=t0k"), "t0k")


def test_absurd_nesting_is_bad_json_not_a_crash():
    raw = "[" * 200_000 + "]" * 200_000
    with pytest.raises(proto.ProtocolError) as e:
        proto.parse(raw, proto.Limits(max_message_bytes=10**6), METHODS, encode)
    assert e.value.code == "bad_json"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["serve", "--port", "70000"], "--port must be in [0, 65535]"),
        (["serve", "--max-queue", "0"], "--max-queue must be >= 1"),
        (["serve", "--max-new-tokens", "0"], "--max-new-tokens must be >= 1"),
        (["serve", "--max-message-bytes", "-5"], "--max-message-bytes must be >= 1"),
        (["serve", "--max-prompt-tokens", "0"], "--max-prompt-tokens must be >= 1"),
    ],
)
def test_serve_refuses_bad_settings_before_loading_a_model(capsys, argv, message):
    from specdec.cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
