"""The specdec WebSocket protocol, version 1 (docs/websocket.md): parse client messages, build server messages.

Contract: pure functions, no I/O, no torch, no websockets. ``parse(raw, limits, methods, encode,
render)`` turns one text message into a ``Generate`` or ``Cancel`` or raises ``ProtocolError(code,
message, id)``; a ``Generate`` carries a validated ``specdec.core.config.GenerateSpec`` and the
prompt's token ids, so the engine never sees an invalid request. A ``generate`` names its prompt
either as ``prompt`` (text to continue) or as chat ``messages``, which ``render`` (the model's chat
template, ``chat_prompt.renderer``) turns into the prompt text with the assistant's turn open; bad
messages are ``bad_params``, a model without a template ``no_chat_template``. The ``hello``,
``start``, ``step``, ``done`` and ``error`` builders return JSON-ready dicts; ``dumps`` encodes one
compactly. Every error code a client can receive is in ``ERROR_CODES``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from specdec.core.config import ConfigError, GenerateSpec
from specdec.core.events import Stats, StepEvent
from specdec.core.methods import GENERATE_ORDER, METHODS, preferred
from specdec.engine.chat import ChatError, NoTemplate
from specdec.server import params

PROTOCOL_VERSION = 1
ERROR_CODES = {
    "bad_json": "the message is not valid JSON (or not UTF-8 text)",
    "bad_message": "not a JSON object, a binary frame, or a missing/invalid type or id",
    "unknown_type": "type is neither generate nor cancel",
    "bad_params": "a generate field is unknown, of the wrong type or out of range",
    "unknown_method": "method is not one the server's engine offers (see hello.methods)",
    "too_large": "the message is longer than limits.max_message_bytes",
    "prompt_too_long": "the prompt has more tokens than limits.max_prompt_tokens",
    "no_chat_template": "messages were sent but the model has no chat template (see hello.chat); send a prompt",
    "busy": "the request queue is full (limits.max_queue waiting); retry after retry_after_s seconds",
    "too_many": "this client already has limits.max_per_client requests queued or running; retry after "
    "retry_after_s seconds",
    "queue_timeout": "the request could not start within limits.max_wait_s seconds; retry after retry_after_s seconds",
    "duplicate_id": "a request with this id is already queued or running on this connection",
    "unknown_id": "cancel names no request queued or running on this connection",
    "shutting_down": "the server is shutting down and takes no new requests",
    "unauthorized": "a token is required (Authorization: Bearer T or ?token=T); the connection closes with 1008",
    "internal": "the engine failed on this request; the server keeps serving",
}
STOP_REASONS = ("eos", "length", "context", "cancelled", "shutdown", "error")
SAMPLING_FIELDS = ("temperature", "top_k", "top_p", "seed")
SPEC_FIELDS = ("method", "k", "max_new_tokens", "confidence", "ngram_max", "ngram_min")
GENERATE_FIELDS = frozenset(("type", "id", "prompt", "messages") + SPEC_FIELDS + SAMPLING_FIELDS)
MAX_ID_CHARS = 128
_STATS_FIELDS = tuple(f.name for f in fields(Stats))
_STATS_DERIVED = (
    "alpha",
    "alpha_tested",
    "tau",
    "tokens_per_s",
    "alpha_per_position",
    "conditional_alpha_per_position",
)

RequestId = str | int


class ProtocolError(Exception):
    """A client error: ``code`` from ERROR_CODES, a human ``message``, and the request ``id`` if known."""

    def __init__(self, code: str, message: str, id: RequestId | None = None) -> None:
        assert code in ERROR_CODES, code
        super().__init__(message)
        self.code, self.message, self.id = code, message, id


@dataclass(frozen=True)
class Limits:
    """What the server accepts (sent to every client in ``hello``), and its defaults: ``method`` (None:
    the registry's ``GENERATE_ORDER``) and ``k`` for a request that names no method."""

    max_message_bytes: int = 2**21  # well above any context's worth of text: a long prompt is a context error
    max_prompt_tokens: int = 511
    max_new_tokens: int = 512  # the length of a chat reply that names none (a WebSocket request's: up to 128)
    max_queue: int = 256
    method: str | None = None
    k: int | str = "auto"
    retry_after_s: int = 1  # what a refusal for a full queue tells the client to wait
    max_per_client: int = 16  # queued + running requests of one client (a connection; an HTTP key/address)
    max_wait_s: float = 30.0  # a request that cannot start within this is refused (queue_timeout)
    queue_update_s: float = 5.0  # how often a queued WebSocket request hears its position again
    context: int | None = None  # the model's context: the longest length a request may ask (None: unchecked)

    def to_dict(self) -> dict[str, int | float]:
        return {
            "max_message_bytes": self.max_message_bytes,
            "max_prompt_tokens": self.max_prompt_tokens,
            "max_new_tokens": self.max_new_tokens,
            "max_queue": self.max_queue,
            "max_per_client": self.max_per_client,
            "max_wait_s": self.max_wait_s,
            "context": self.context,
        }


@dataclass(frozen=True)
class Generate:
    id: RequestId
    prompt: str
    prompt_ids: list[int]
    spec: GenerateSpec


@dataclass(frozen=True)
class Cancel:
    id: RequestId


Render = Callable[[Any], str]


def parse(
    raw: str | bytes,
    limits: Limits,
    methods: tuple[str, ...],
    encode: Callable[[str], list[int]],
    render: Render | None = None,
) -> Generate | Cancel:
    """One client message -> Generate or Cancel; anything else raises ProtocolError."""
    size = len(raw.encode("utf-8")) if isinstance(raw, str) else len(raw)
    if size > limits.max_message_bytes:
        raise ProtocolError("too_large", f"the message is {size} bytes; the limit is {limits.max_message_bytes}")
    if isinstance(raw, bytes):
        raise ProtocolError("bad_message", "send JSON in text frames, not binary frames")
    try:
        msg = json.loads(raw)
    except (ValueError, RecursionError) as e:  # RecursionError: absurdly deep nesting
        raise ProtocolError("bad_json", f"not valid JSON: {e}") from None
    if not isinstance(msg, dict):
        raise ProtocolError("bad_message", f"a message must be a JSON object, got {type(msg).__name__}")
    rid = _request_id(msg)
    kind = msg.get("type")
    if not isinstance(kind, str):
        raise ProtocolError("bad_message", "every message needs a string 'type' (generate or cancel)", rid)
    if kind == "cancel":
        return Cancel(rid)
    if kind == "generate":
        return _generate(msg, rid, limits, methods, encode, render)
    raise ProtocolError("unknown_type", f"unknown message type {kind!r}; expected generate or cancel", rid)


def _request_id(msg: dict[str, Any]) -> RequestId:
    rid = msg.get("id")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        raise ProtocolError("bad_message", "every message needs an 'id': a string or an integer chosen by the client")
    if isinstance(rid, str) and not 1 <= len(rid) <= MAX_ID_CHARS:
        raise ProtocolError("bad_message", f"id must be 1 to {MAX_ID_CHARS} characters")
    return rid


def _generate(
    msg: dict[str, Any],
    rid: RequestId,
    limits: Limits,
    methods: tuple[str, ...],
    encode: Callable[[str], list[int]],
    render: Render | None,
) -> Generate:
    unknown = sorted(set(msg) - GENERATE_FIELDS)
    if unknown:
        raise ProtocolError(
            "bad_params", f"unknown field(s): {', '.join(unknown)}; known: {', '.join(sorted(GENERATE_FIELDS))}", rid
        )
    prompt = _prompt(msg, rid, render)
    method = msg.get("method", default_method(methods, limits.method))
    if not isinstance(method, str) or method not in methods:
        raise ProtocolError(
            "unknown_method", f"unknown method {method!r}; this server offers: {', '.join(methods)}", rid
        )
    spec = _spec(msg, method, rid, limits, default_k(msg, methods, limits))
    ids = encode(prompt)
    if not ids:
        raise ProtocolError("bad_params", "the prompt encodes to no tokens", rid)
    if len(ids) > limits.max_prompt_tokens:
        raise ProtocolError(
            "prompt_too_long", f"the prompt is {len(ids)} tokens; the limit is {limits.max_prompt_tokens}", rid
        )
    return Generate(rid, prompt, ids, spec)


def _prompt(msg: dict[str, Any], rid: RequestId, render: Render | None) -> str:
    """The prompt text: ``prompt`` as sent, or ``messages`` through the chat template."""
    if "messages" not in msg:
        prompt = msg.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise ProtocolError("bad_params", "prompt must be a non-empty string (or send chat messages)", rid)
        return prompt
    if "prompt" in msg:
        raise ProtocolError("bad_params", "send either prompt or messages, not both", rid)
    if render is None:
        raise ProtocolError("no_chat_template", "this server takes no chat messages; send a prompt", rid)
    try:
        return render(msg["messages"])
    except NoTemplate as e:
        raise ProtocolError("no_chat_template", f"{e}; send a prompt", rid) from None
    except ChatError as e:
        raise ProtocolError("bad_params", str(e), rid) from None


def _spec(msg: dict[str, Any], method: str, rid: RequestId, limits: Limits, k: int | str = "auto") -> GenerateSpec:
    """The request's settings; sampling and length through the checks HTTP shares (``params.py``)."""
    try:
        sampling = params.sampling(**{f: msg[f] for f in SAMPLING_FIELDS if f in msg})
        asked = msg.get("max_new_tokens", min(128, limits.max_new_tokens))
        length = params.length(asked, "max_new_tokens", limits.context)
    except params.ParamError as e:
        raise ProtocolError("bad_params", e.message, rid) from None
    fields = {f: msg[f] for f in SPEC_FIELDS if f in msg} | {"method": method, "max_new_tokens": length}
    fields.setdefault("k", k)
    try:
        return GenerateSpec(**fields, sampling=sampling)
    except ConfigError as e:
        raise ProtocolError("bad_params", str(e), rid) from None
    except (TypeError, ValueError) as e:  # e.g. a string where a number belongs, compared before checking
        raise ProtocolError("bad_params", f"invalid parameter: {e}", rid) from None


def default_method(methods: tuple[str, ...], chosen: str | None = None) -> str:
    """The method of a request that names none: the server's ``chosen`` one (``--method``), else the
    first of the registry's ``GENERATE_ORDER`` the engine offers (lookup on a model with no draft)."""
    return chosen if chosen in methods else preferred(methods, GENERATE_ORDER)


def default_k(msg: dict[str, Any], methods: tuple[str, ...], limits: Limits) -> int | str:
    """The k of a request that names none: the server's ``--k`` when the request runs the server's
    default method (its method absent or the same), else ``auto``."""
    if "k" in msg or msg.get("method", default_method(methods, limits.method)) != default_method(
        methods, limits.method
    ):
        return "auto"
    return limits.k


def hello(methods: tuple[str, ...], context: int, limits: Limits, auth: bool, chat: bool = False) -> dict[str, Any]:
    return {
        "type": "hello",
        "id": None,
        "protocol": PROTOCOL_VERSION,
        "methods": list(methods),
        "method_info": [METHODS[m].info() for m in methods],
        "default_method": default_method(methods, limits.method),
        "context": context,
        "limits": limits.to_dict(),
        "auth": auth,
        "chat": chat,
    }


def start(req: Generate, queued_ms: float) -> dict[str, Any]:
    s = req.spec
    return {
        "type": "start",
        "id": req.id,
        "method": s.method,
        "k": s.k,
        "max_new_tokens": s.max_new_tokens,
        "sampling": {f: getattr(s.sampling, f) for f in SAMPLING_FIELDS},
        "prompt_tokens": len(req.prompt_ids),
        "queued_ms": round(queued_ms, 3),
    }


def queued(rid: RequestId, position: int, estimate_s: float | None) -> dict[str, Any]:
    """A request waits: ``position`` 1 starts next; ``estimate_s`` the rough wait (null: unknown)."""
    wait = None if estimate_s is None else round(estimate_s, 1)
    return {"type": "queued", "id": rid, "position": position, "estimate_s": wait}


def retry_after(estimate_s: float | None, floor: int) -> int:
    """Whole seconds to wait before retrying: the estimate of the wait, at least ``floor``."""
    return max(floor, 0 if estimate_s is None else int(estimate_s + 0.999))


def step(rid: RequestId, ev: StepEvent) -> dict[str, Any]:
    pieces = [
        {"text": pc.text, "kind": pc.kind, "token_id": pc.token_id, "position": pc.position, "p": pc.p, "q": pc.q}
        for pc in ev.pieces
    ]
    return {
        "type": "step",
        "id": rid,
        "step": ev.step,
        "pieces": pieces,
        "text": ev.text,
        "draft_size": ev.draft_size,
        "timings_ms": ev.timings_ms,
        "stats": stats_dict(ev.stats),
        **({"batch": dict(ev.batch)} if getattr(ev, "batch", None) else {}),
    }


def done(rid: RequestId, stop: str, text: str, tokens: int, stats: Stats | None) -> dict[str, Any]:
    assert stop in STOP_REASONS, stop
    return {
        "type": "done",
        "id": rid,
        "stop": stop,
        "text": text,
        "tokens": tokens,
        "stats": stats_dict(stats or Stats()),
    }


def stats_dict(s: Stats) -> dict[str, Any]:
    """``Stats.to_dict()`` without ``dataclasses.asdict``'s deep copy (10x faster; sent every step)."""
    d = {name: getattr(s, name) for name in _STATS_FIELDS}
    d.update((name, getattr(s, name)) for name in _STATS_DERIVED)
    return d


def error(rid: RequestId | None, code: str, message: str, retry_after_s: int | None = None) -> dict[str, Any]:
    """An error message; ``busy``, ``too_many`` and ``queue_timeout`` also say how long to wait
    before retrying (``retry_after_s``, as HTTP's ``Retry-After``)."""
    assert code in ERROR_CODES, code
    out = {"type": "error", "id": rid, "code": code, "message": message}
    return out if retry_after_s is None else out | {"retry_after_s": retry_after_s}


def dumps(msg: dict[str, Any]) -> str:
    return json.dumps(msg, separators=(",", ":"), allow_nan=False)
