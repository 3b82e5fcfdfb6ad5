"""The OpenAI-compatible ``/v1/completions`` protocol of ``specdec serve``: parse and check requests.

Contract: pure functions, no I/O, no torch. ``parse(raw, limits, methods, encode)`` turns a request
body into a ``Completion`` (a validated ``GenerateSpec``, the prompt's token ids, ``stream``,
``include_usage``) or raises ``ApiError(status, code, message, param)``, whose ``body()`` is
OpenAI's error object. The limits are the WebSocket protocol's (``ws_protocol.Limits``), and so are
the error codes (``ws_protocol.ERROR_CODES``) plus ``model_not_found`` and ``not_found`` (no such
route); ``STATUS`` gives each code its HTTP status. OpenAI fields: ``model`` (must be ``specdec``),
``prompt`` (a string or token ids), ``max_tokens`` (default 16, as OpenAI), ``temperature`` (default
1, as OpenAI), ``top_p``, ``seed``, ``stream``, ``stream_options.include_usage``, ``user``; vLLM's
``top_k`` and ``return_token_ids``. ``n``, ``stop``, ``echo`` and ``logprobs`` are checked by
``openai_options.py``. The fields it does not implement (``NO_OP``: ``best_of``,
``frequency_penalty``, ``presence_penalty``, ``logit_bias``) are accepted absent, null or at their
no-op value (``best_of: 1``, ``frequency_penalty: 0``, ``logit_bias: {}``, ...), as clients that
always send defaults do; any other value is a 400 whose ``param`` names the field. Ranges as OpenAI
and vLLM check them: ``max_tokens`` >= 1 (0 is a 400, not 16), ``temperature`` in [0, 2]; every
error names the OpenAI field (``max_tokens``, not the engine's ``max_new_tokens``) in its message
and ``param``. The extension object ``specdec`` (``method``, ``k``, ``confidence``, ``ngram_max``,
``ngram_min``) picks the method. ``checked``, ``spec_for``, ``stream_flags`` and ``check_length``
are the checks every endpoint shares (``openai_chat.py`` parses ``/v1/chat/completions`` with them);
the replies, every token's fate included, are built in ``openai_replies.py``. Why a second protocol:
any OpenAI client then works against this server and against vLLM alike, and the remote backend is
tested against this one without vLLM.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from specdec.core.config import ConfigError, GenerateSpec
from specdec.server import params
from specdec.server import ws_protocol as proto
from specdec.server.openai_options import OptionError, Options, options

MODEL = "specdec"
STATUS = {
    "bad_json": 400,
    "bad_message": 400,
    "bad_params": 400,
    "unknown_method": 400,
    "prompt_too_long": 400,
    "no_chat_template": 400,
    "model_not_found": 404,
    "not_found": 404,
    "too_large": 413,
    "unauthorized": 401,
    "forbidden": 403,
    "timeout": 408,
    "busy": 429,
    "too_many": 429,
    "queue_timeout": 503,
    "shutting_down": 503,
    "internal": 500,
}
NO_OP = {  # fields this server does not implement: absent, null or this value (no effect), else a 400
    "best_of": 1,
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "logit_bias": {},
}
FIELDS = frozenset(
    "model prompt max_tokens temperature top_p top_k seed stream stream_options user return_token_ids specdec "
    "n stop echo logprobs".split()
) | frozenset(NO_OP)
MAX_TEMPERATURE = params.MAX_TEMPERATURE  # OpenAI's range is [0, 2]
EXT_FIELDS = frozenset(("method", "k", "confidence", "ngram_max", "ngram_min"))


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.param = status, code, message, param

    def body(self) -> dict[str, Any]:
        if self.code == "prompt_too_long":  # vLLM's shape, which clients match on ("maximum context length")
            return {"error": {"message": self.message, "type": "BadRequestError", "param": self.param, "code": 400}}
        kind = (
            "rate_limit_error"
            if self.status == 429
            else "invalid_request_error"
            if self.status < 500
            else "server_error"
        )
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


def error(code: str, message: str, param: str | None = None) -> ApiError:
    return ApiError(STATUS[code], code, message, param)


def engine_failure(exc: BaseException) -> ApiError:
    """The error a request gets when the engine raised while decoding it."""
    return error("internal", f"the engine failed: {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class Completion:
    id: str
    prompt_ids: list[int]
    spec: GenerateSpec
    stream: bool
    include_usage: bool
    chat: bool = False  # /v1/chat/completions: replies carry a message or delta, not text
    options: Options = Options()  # n, stop, echo, logprobs (openai_options.py)
    prompt_text: str = ""  # what echo sends back


def parse(
    raw: bytes,
    limits: proto.Limits,
    methods: tuple[str, ...],
    encode: Callable[[str], list[int]],
    vocab: int | None = None,
    decode: Callable[[list[int]], str] | None = None,
) -> Completion:
    body, ext, method = checked(raw, limits, methods, FIELDS, NO_OP)
    ids = _prompt_ids(body.get("prompt"), encode, limits)
    if vocab is not None and not all(0 <= t < vocab for t in ids):
        raise error("bad_params", f"prompt token ids must be in [0, {vocab})", "prompt")
    spec = spec_for(body, ext, method, limits)
    stream, include_usage = stream_flags(body)
    opts = checked_options(body, chat=False)
    spec = replace(spec, top_logprobs=opts.logprobs or 0)
    text = _prompt_text(body.get("prompt"), ids, decode) if opts.echo else ""
    return Completion(f"cmpl-{uuid.uuid4().hex[:24]}", ids, spec, stream, include_usage, False, opts, text)


def checked_options(body: dict, chat: bool) -> Options:
    """``n``, ``stop``, ``echo``, ``logprobs`` (``openai_options.options``), or the 400 naming the field."""
    try:
        return options(body, chat)
    except OptionError as e:
        raise error("bad_params", str(e), e.param) from None


def _prompt_text(prompt: Any, ids: list[int], decode: Callable[[list[int]], str] | None) -> str:
    """The prompt as text, for echo: as sent, or its token ids decoded."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt
    return decode(ids) if decode is not None else ""


def checked(
    raw: bytes, limits: proto.Limits, methods: tuple[str, ...], fields: frozenset[str], no_op: dict[str, Any]
) -> tuple[dict, dict, str]:
    """The request body as a dict, its ``specdec`` extension and the method, once the checks every
    endpoint shares passed: size, JSON, known ``fields``, the model, ``no_op`` values, the method."""
    if len(raw) > limits.max_message_bytes:
        raise error("too_large", f"the request body is {len(raw)} bytes; the limit is {limits.max_message_bytes}")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise error("bad_json", f"the body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise error("bad_message", f"the body must be a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - fields)
    if unknown:
        raise error("bad_params", f"unsupported field(s): {', '.join(unknown)}", unknown[0])
    if body.get("model") != MODEL:
        raise error(
            "model_not_found", f"the model {body.get('model')!r} does not exist; this server has {MODEL!r}", "model"
        )
    _refuse_unsupported(body, no_op)
    ext = body.get("specdec") or {}
    if not isinstance(ext, dict) or set(ext) - EXT_FIELDS:
        raise error(
            "bad_params", f"specdec must be an object with fields among {', '.join(sorted(EXT_FIELDS))}", "specdec"
        )
    method = ext.get("method", proto.default_method(methods, limits.method))
    if method not in methods:
        raise error("unknown_method", f"unknown method {method!r}; this server offers: {', '.join(methods)}", "method")
    return body, {"k": proto.default_k(ext, methods, limits)} | ext, method


def stream_flags(body: dict) -> tuple[bool, bool]:
    """``stream`` and ``stream_options.include_usage``, checked."""
    stream = body.get("stream", False)
    opts = body.get("stream_options") or {}
    if not isinstance(stream, bool) or not isinstance(opts, dict):
        raise error("bad_params", "stream must be a boolean and stream_options an object", "stream")
    return stream, bool(opts.get("include_usage"))


def check_length(ids: list[int], limits: proto.Limits, param: str) -> list[int]:
    """The prompt's ids, or a 400: none, or more than ``limits.max_prompt_tokens`` (vLLM's message and
    shape: ``maximum context length``, ``type`` BadRequestError, ``code`` 400)."""
    if not ids:
        raise error("bad_params", "the prompt encodes to no tokens", param)
    if len(ids) > limits.max_prompt_tokens:
        context = limits.context or limits.max_prompt_tokens + 1
        raise error(
            "prompt_too_long",
            f"This model's maximum context length is {context} tokens and this server takes prompts of at most "
            f"{limits.max_prompt_tokens} tokens. However, your request has {len(ids)} input tokens. Please reduce "
            "the length of the input.",
            param,
        )
    return list(ids)


def _prompt_ids(prompt: Any, encode: Callable[[str], list[int]], limits: proto.Limits) -> list[int]:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str) and prompt:
        ids = encode(prompt)
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        ids = prompt
    else:
        raise error("bad_params", "prompt must be a non-empty string or a non-empty list of token ids", "prompt")
    return check_length(ids, limits, "prompt")


def _same(value: Any, no_op: Any) -> bool:
    """``value`` is ``no_op`` as JSON sees it (``true`` is not ``1``, ``0.0`` is ``0``)."""
    return isinstance(value, bool) == isinstance(no_op, bool) and value == no_op


def _refuse_unsupported(body: dict, no_ops: dict[str, Any]) -> None:
    """Raise a 400 naming the first field of ``no_ops`` sent with a value that would change the output."""
    for name, no_op in no_ops.items():
        value = body.get(name)
        if value is not None and not _same(value, no_op):
            allowed = "null" if no_op is None else f"null or {json.dumps(no_op)}"
            raise error(
                "bad_params", f"{name}={json.dumps(value)} is not supported by this server; send {allowed}", name
            )


def _config_error(e: ConfigError, max_field: str) -> ApiError:
    """The engine's refusal, in the OpenAI field names: ``param`` is the field the message names."""
    message = str(e).replace("max_new_tokens", max_field)
    word = message.split(" ", 1)[0]
    param = word if word in FIELDS | {max_field} else f"specdec.{word}" if word in EXT_FIELDS else None
    return error("bad_params", message, param)


def spec_for(
    body: dict, ext: dict, method: str, limits: proto.Limits, max_field: str = "max_tokens", max_default: int = 16
) -> GenerateSpec:
    """The request's ``GenerateSpec``; every refusal names the OpenAI field (``max_field``: the
    length field the client sent, ``max_tokens`` or chat's ``max_completion_tokens``)."""
    top_k = body.get("top_k")
    try:  # the checks the WebSocket protocol shares (params.py)
        max_tokens = params.length(_given(body, max_field, max_default), max_field, limits.context)
        sampling = params.sampling(
            temperature=_given(body, "temperature", 1.0),
            top_k=0 if top_k in (None, -1) else top_k,  # vLLM's -1 also means off
            top_p=_given(body, "top_p", 1.0),
            seed=body.get("seed"),
        )
    except params.ParamError as e:
        raise error("bad_params", e.message, e.param) from None
    try:
        return GenerateSpec(method=method, max_new_tokens=max_tokens, sampling=sampling, **{
            f: ext[f] for f in EXT_FIELDS - {"method"} if f in ext
        })  # fmt: skip
    except ConfigError as e:
        raise _config_error(e, max_field) from None
    except (TypeError, ValueError) as e:
        raise error("bad_params", f"invalid parameter: {e}") from None


def _given(body: dict, name: str, default: Any) -> Any:
    """``body[name]``, or ``default`` when absent or null (as OpenAI reads a null)."""
    value = body.get(name)
    return default if value is None else value
