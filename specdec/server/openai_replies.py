"""The replies of ``specdec serve``'s OpenAI-compatible endpoints, completions and chat alike.

Contract: pure functions of a parsed request (``openai_protocol.Completion``) and its choices'
parts (``openai_choices.Part``, one per engine step, the stop strings cut), no I/O. One code path
builds both endpoints' replies; only the choice differs: ``/v1/completions`` sends ``text``,
``/v1/chat/completions`` a ``message: {role, content}`` (whole reply) or a ``delta`` (stream;
``role_chunk`` opens each choice's stream with ``delta: {"role": "assistant"}`` as OpenAI does),
with ``object`` ``chat.completion`` / ``chat.completion.chunk``. Every choice has its ``index``
(``n`` samples), its ``finish_reason`` once ended (``stop``: eos or a stop string; ``length``;
``abort``: cancelled, shutdown, engine failure, as vLLM says), ``logprobs`` in the endpoint's own
format when asked (completions: ``tokens``, ``token_logprobs``, ``top_logprobs``, ``text_offset``;
chat: ``content: [{token, logprob, bytes, top_logprobs}]``), and ``token_ids`` (vLLM's
``return_token_ids``); every reply the ``specdec`` extension: each engine step's token fates
(``ws_protocol.step`` without its type and id) and the final stats.
"""

from __future__ import annotations

import time
from typing import Any

from specdec.core.events import Stats, StepEvent
from specdec.server import ws_protocol as proto
from specdec.server.openai_choices import ChoiceRun, Part, Token
from specdec.server.openai_protocol import MODEL, Completion


def step_fates(ev: StepEvent) -> dict[str, Any]:
    d = proto.step(None, ev)
    del d["type"], d["id"]
    d["stop"] = ev.stop
    return d


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def logprobs(req: Completion, tokens: list[Token]) -> dict[str, Any] | None:
    if req.options.logprobs is None:
        return None
    k = req.options.logprobs
    if req.chat:
        return {"content": [_chat_logprob(t, k) for t in tokens], "refusal": None}
    return {
        "tokens": [t.text for t in tokens],
        "token_logprobs": [t.logp for t in tokens],
        "top_logprobs": [{s: v for _, s, v in t.top[:k]} for t in tokens] if k else None,
        "text_offset": [t.offset for t in tokens],
    }


def _chat_logprob(t: Token, k: int) -> dict[str, Any]:
    top = [{"token": s, "logprob": v, "bytes": list(s.encode())} for _, s, v in t.top[:k]]
    return {"token": t.text, "logprob": t.logp, "bytes": list(t.text.encode()), "top_logprobs": top}


def choice(
    req: Completion,
    index: int,
    text: str | None,
    tokens: list[Token],
    finish: str | None,
    whole: bool,
    stop_reason: str | None = None,
):
    """One choice: ``text`` for completions; for chat the reply ``message`` (``whole``) or a
    stream's ``delta`` (``text`` None: an empty delta, as OpenAI ends a stream)."""
    out: dict[str, Any] = {"index": index}
    if not req.chat:
        out["text"] = text or ""
    elif whole:
        out["message"] = {"role": "assistant", "content": text or ""}
    else:  # every chunk but a stream's empty last one carries a string, as OpenAI and vLLM send it
        out["delta"] = {} if not text and finish is not None else {"content": text or ""}
    ids = [t.id for t in tokens]
    ends = {"finish_reason": finish, "stop_reason": stop_reason}  # vLLM's stop_reason: the stop string
    return out | {"token_ids": ids} | ends | {"logprobs": logprobs(req, tokens)}


def role_chunk(req: Completion, index: int = 0) -> dict[str, Any]:
    """A chat choice's first chunk: the assistant's role, no content yet."""
    first = {"index": index, "delta": {"role": "assistant", "content": ""}, "finish_reason": None, "logprobs": None}
    return envelope(req, [first], chunk=True)


def echo_chunk(req: Completion, index: int = 0) -> dict[str, Any]:
    """A completion choice's first chunk when ``echo``: the prompt."""
    return envelope(req, [choice(req, index, req.prompt_text, [], None, whole=False)], chunk=True)


def chunk(req: Completion, run: ChoiceRun, part: Part) -> dict[str, Any]:
    """One streamed step of a choice: its released text and tokens, and every token's fate in
    ``specdec``; the part that ends the choice carries the ``finish_reason`` and the final stats."""
    one = choice(req, run.index, part.text, part.tokens, part.finish, False, run.cut.matched if part.finish else None)
    body = envelope(req, [one], chunk=True)
    ext: dict[str, Any] = {} if part.event is None else {"step": step_fates(part.event)}
    if part.finish is not None:
        ext["stats"] = proto.stats_dict(run.stats or Stats())
    return body | {"specdec": ext}


def usage_chunk(req: Completion, runs: list[ChoiceRun]) -> dict[str, Any]:
    """The chunk ``stream_options.include_usage`` asks for: ``choices: []`` and the usage."""
    tokens = sum(len(r.tokens) for r in runs)
    ext = [{"stop": r.handle.stop, "stats": proto.stats_dict(r.stats or Stats())} for r in runs]
    ext = ext[0] if len(ext) == 1 else {"choices": ext}
    return envelope(req, [], chunk=True) | {"usage": usage(len(req.prompt_ids), tokens), "specdec": ext}


def response(req: Completion, runs: list[ChoiceRun], steps: list[list[StepEvent]]) -> dict[str, Any]:
    prefix = req.prompt_text if req.options.echo else ""
    choices = [choice(req, r.index, prefix + "".join(r.text), r.tokens, r.finish, True, r.cut.matched) for r in runs]
    out = envelope(req, choices, chunk=False)
    out["usage"] = usage(len(req.prompt_ids), sum(len(r.tokens) for r in runs))
    ext = [_choice_ext(r, evs) for r, evs in zip(runs, steps)]
    out["specdec"] = ext[0] if len(ext) == 1 else {"choices": ext}
    return out


def _choice_ext(run: ChoiceRun, steps: list[StepEvent]) -> dict[str, Any]:
    stats = proto.stats_dict(run.stats or Stats())
    return {"stop": run.handle.stop, "steps": [step_fates(ev) for ev in steps], "stats": stats}


def envelope(req: Completion, choices: list, chunk: bool) -> dict[str, Any]:
    kind = ("chat.completion.chunk" if chunk else "chat.completion") if req.chat else "text_completion"
    return {"id": req.id, "object": kind, "created": int(time.time()), "model": MODEL, "choices": choices}


def models(methods: tuple[str, ...], context: int, limits: proto.Limits, chat: bool = False) -> dict[str, Any]:
    info = {
        "methods": list(methods),
        "default_method": proto.default_method(methods, limits.method),
        "context": context,
    }
    model = {"id": MODEL, "object": "model", "owned_by": "specdec", "max_model_len": context}
    return {"object": "list", "data": [model | {"specdec": info | {"chat": chat, "limits": limits.to_dict()}}]}
