"""``/v1/chat/completions`` of ``specdec serve``: a conversation in, the same engine request out.

Contract: ``parse(raw, limits, methods, encode, render)`` is ``openai_protocol.parse`` for chat,
pure like it (``render`` is the model's chat template as a function of the messages; the
transport passes ``chat_prompt.renderer(backend)``). It returns a ``Completion`` with ``chat``
set, whose prompt is the rendered conversation with the assistant's turn open, or raises the same
``ApiError``s with the same checks: the shared fields, ranges, no-op values (chat's own:
``tools: []``, ``tool_choice: "none"``, ``response_format: {"type": "text"}``, plus the penalties
and ``logit_bias``), ``n``, ``stop``, ``logprobs`` / ``top_logprobs`` (``openai_options.py``) and
the ``specdec`` extension. ``messages`` are checked by ``specdec.engine.chat`` (400, ``param``
``messages``); a model without a chat template is a 400 ``no_chat_template``. The length is
``max_completion_tokens`` (OpenAI's current name) or else ``max_tokens``; absent, the reply may
run to ``limits.max_new_tokens`` (OpenAI's default is the model's limit: a chat reply ends with
the model's end-of-turn token). Why a prompt: a turn is a prompt like any other, so chat decodes
through the one loop and verifier, and speculation carries across turns (lookup copies from earlier
turns, the prompt-prefix cache keeps the shared part).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from specdec.engine.chat import ChatError, NoTemplate
from specdec.server import openai_protocol as oa
from specdec.server import ws_protocol as proto

NO_OP: dict[str, Any] = {
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "logit_bias": {},
    "tools": [],
    "tool_choice": "none",
    "response_format": {"type": "text"},
}
FIELDS = frozenset(
    "model messages max_tokens max_completion_tokens temperature top_p top_k seed stream stream_options user "
    "return_token_ids specdec n stop logprobs top_logprobs".split()
) | frozenset(NO_OP)


def parse(
    raw: bytes,
    limits: proto.Limits,
    methods: tuple[str, ...],
    encode: Callable[[str], list[int]],
    render: Callable[[Any], str],
) -> oa.Completion:
    body, ext, method = oa.checked(raw, limits, methods, FIELDS, NO_OP)
    ids = oa.check_length(encode(prompt_text(body.get("messages"), render)), limits, "messages")
    length = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    spec = oa.spec_for(body, ext, method, limits, length, limits.max_new_tokens)
    stream, include_usage = oa.stream_flags(body)
    opts = oa.checked_options(body, chat=True)
    spec = replace(spec, top_logprobs=opts.logprobs or 0)
    return oa.Completion(f"chatcmpl-{uuid.uuid4().hex[:24]}", ids, spec, stream, include_usage, True, opts)


def prompt_text(messages: Any, render: Callable[[Any], str]) -> str:
    """The conversation as the model's prompt, or the 400 that says what is wrong with it."""
    try:
        return render(messages)
    except NoTemplate as e:
        raise oa.error("no_chat_template", str(e), "messages") from None
    except ChatError as e:
        raise oa.error("bad_params", str(e), "messages") from None
