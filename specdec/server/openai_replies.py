"""The replies of ``specdec serve``'s OpenAI-compatible endpoints, completions and chat alike.

Contract: pure functions of a parsed request (``openai_protocol.Completion``) and the engine's
``StepEvent``s, no I/O. One code path builds both endpoints' replies; only the choice differs:
``/v1/completions`` sends ``text``, ``/v1/chat/completions`` a ``message: {role, content}`` (whole
reply) or a ``delta`` (stream; ``role_chunk`` opens the stream with ``delta: {"role": "assistant"}``
as OpenAI does), with ``object`` ``chat.completion`` / ``chat.completion.chunk``. Every choice also
carries ``token_ids`` (vLLM's ``return_token_ids``), and every reply the ``specdec`` extension:
each engine step's token fates (``ws_protocol.step`` without its type and id) and the final stats.
``finish_reason`` is ``stop`` when the model ended its turn (eos), ``length`` at the length or
context limit, ``abort`` otherwise (cancelled, shutdown, an engine failure).
"""

from __future__ import annotations

import time
from typing import Any

from specdec.core.events import Stats, StepEvent
from specdec.server import ws_protocol as proto
from specdec.server.openai_protocol import MODEL, Completion

FINISH = {"eos": "stop", "length": "length", "context": "length"}  # else "abort" (cancelled, shutdown, error)


def step_fates(ev: StepEvent) -> dict[str, Any]:
    d = proto.step(None, ev)
    del d["type"], d["id"]
    d["stop"] = ev.stop
    return d


def finish_reason(stop: str | None) -> str | None:
    return None if stop is None else FINISH.get(stop, "abort")


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def choice(req: Completion, text: str | None, ids: list[int], stop: str | None, whole: bool) -> dict[str, Any]:
    """The one choice: ``text`` for completions; for chat the reply ``message`` (``whole``) or a
    stream's ``delta`` (``text`` None: an empty delta, as OpenAI ends a stream)."""
    out: dict[str, Any] = {"index": 0}
    if not req.chat:
        out["text"] = text or ""
    elif whole:
        out["message"] = {"role": "assistant", "content": text or ""}
    else:
        out["delta"] = {} if text is None else {"content": text}
    return out | {"token_ids": ids, "finish_reason": finish_reason(stop), "logprobs": None}


def role_chunk(req: Completion) -> dict[str, Any]:
    """A chat stream's first chunk: the assistant's role, no content yet."""
    first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None, "logprobs": None}
    return envelope(req, [first], chunk=True)


def chunk(req: Completion, ev: StepEvent) -> dict[str, Any]:
    """One streamed step: its emitted text and tokens, and every token's fate in ``specdec``; the
    step that ends the request carries the ``finish_reason`` and, in ``specdec``, the final stats."""
    ext = {"step": step_fates(ev)} | ({"stats": proto.stats_dict(ev.stats)} if ev.stop is not None else {})
    return envelope(req, [choice(req, ev.text, ev.token_ids, ev.stop, whole=False)], chunk=True) | {"specdec": ext}


def final_chunks(req: Completion, stop: str, tokens: int, stats: Stats | None, carried: bool) -> list[dict[str, Any]]:
    """What follows the last step's chunk, as OpenAI and vLLM send it.

    With ``stream_options.include_usage``: one chunk with ``choices: []``, the usage, and the stop
    reason and stats in ``specdec``. Without it no chunk has empty choices (``ch.choices[0]`` works
    on every chunk): nothing when a step ``carried`` the finish reason, else (a cancel, an engine
    failure, a shutdown) one chunk whose only choice has no text and the finish reason."""
    ext = {"stop": stop, "stats": proto.stats_dict(stats or Stats())}
    if req.include_usage:
        return [envelope(req, [], chunk=True) | {"usage": usage(len(req.prompt_ids), tokens), "specdec": ext}]
    if carried:
        return []
    end = choice(req, None, [], stop, whole=False)
    return [envelope(req, [end], chunk=True) | {"specdec": ext}]


def response(req: Completion, events: list[StepEvent], stop: str) -> dict[str, Any]:
    ids = [t for ev in events for t in ev.token_ids]
    text = "".join(ev.text for ev in events)
    out = envelope(req, [choice(req, text, ids, stop, whole=True)], chunk=False)
    out["usage"] = usage(len(req.prompt_ids), len(ids))
    stats = events[-1].stats if events else Stats()
    out["specdec"] = {"stop": stop, "steps": [step_fates(ev) for ev in events], "stats": proto.stats_dict(stats)}
    return out


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
