"""One remote request's stream: POST /v1/completions, read server-sent events, push ``StepEvent``s.

Contract: ``relay(backend, handle) -> stop`` runs on the request's own thread (``RemoteBackend._run``).
HTTP refusals become the errors a local backend raises (429 ``Busy``, 503 ``ShuttingDown``, other
4xx ``ConfigError`` with the server's message, else ``RemoteError``). Each chunk is pushed at once,
except the one that carries ``finish_reason``: it waits for the usage chunk right behind it, so the
last event carries the stop reason and (from vLLM) stats rebuilt from the exact per-step metrics.
A cancel closes the response, which makes the server abort the request; so does a consumer that
has not read for ``Request.idle_s`` (stop "abandoned"), as in the local backend.
"""

from __future__ import annotations

import json
import time
import urllib.error

from specdec.core.config import ConfigError
from specdec.core.detok import Detokenizer
from specdec.core.events import Piece, Stats, StepEvent
from specdec.serving.backend import Busy, ShuttingDown

FROM_FINISH = {"stop": "eos", "length": "length", "abort": "cancelled"}
READ_TIMEOUT_S = 600.0


class RemoteError(RuntimeError):
    """The remote server failed on a request (a 5xx, an error event, a broken stream)."""


def _refusal(e: urllib.error.HTTPError) -> Exception:
    try:
        msg = json.loads(e.read())["error"]["message"]
    except Exception:  # noqa: BLE001 - not an OpenAI error body
        msg = f"HTTP {e.code} {e.reason}"
    if e.code == 429:
        return Busy(msg)
    if e.code == 503:
        return ShuttingDown(msg)
    return ConfigError(msg) if 400 <= e.code < 500 else RemoteError(f"the server failed: {msg}")


def _ours(d: dict) -> StepEvent:
    """A step dict of our own server (``openai_replies.step_fates``) back into a StepEvent."""
    pieces = tuple(
        Piece(p["token_id"], p["text"], p["kind"], d["step"], p["position"], p["p"], p["q"]) for p in d["pieces"]
    )
    s = d["stats"]
    stats = Stats(*(s[f] for f in Stats.__dataclass_fields__))
    return StepEvent(d["step"], pieces, stats, d.get("timings_ms") or {}, d.get("draft_size", 0), d.get("stop"))


def relay(backend, handle) -> str:
    ids, spec = handle._ids, handle.request.spec
    body = backend.body(ids, spec)
    try:
        resp = backend._open("/v1/completions", body, timeout=READ_TIMEOUT_S)
    except urllib.error.HTTPError as e:
        raise _refusal(e) from None
    handle._resp = resp
    t0 = time.perf_counter()
    detok, stats, held, emitted, steps = make_detok(backend, ids), Stats(), None, 0, 0
    finish, metrics = None, None
    with resp:
        for raw in resp:
            if handle.cancel_reason is not None:
                return handle.cancel_reason
            line = raw.strip()
            if not line.startswith(b"data: "):
                continue
            if line == b"data: [DONE]":
                break
            msg = json.loads(line[6:])
            if "error" in msg:
                raise RemoteError(f"the server failed: {msg['error'].get('message')}")
            if msg.get("usage") is not None or not msg.get("choices"):
                metrics = (msg.get("metrics") or {}).get("speculative_decoding")
                ours_stop = (msg.get("specdec") or {}).get("stop")
                finish = finish or (ours_stop and {"eos": "stop"}.get(ours_stop, ours_stop))
                continue
            choice = msg["choices"][0]
            if backend.kind == "specdec":
                ev = _ours(msg["specdec"]["step"])
            else:
                tokens = list(choice.get("token_ids") or [])
                if not tokens:
                    continue
                steps += 1
                texts = [detok.push(t) for t in tokens]
                plain_first = steps == 1  # the prefill's token: nothing was drafted for it
                ev = vllm_step(steps, tokens, texts, backend.vllm_k, spec.method, stats, plain_first)
            emitted += len(ev.token_ids)
            handle.steps += 1
            if choice.get("finish_reason") is not None:
                finish, held = choice["finish_reason"], ev
                continue
            handle._push(ev)
            idle = handle.request.idle_s
            if idle is not None and time.monotonic() - handle.last_read > idle:  # nobody reads: stop the server's work
                handle.steps_at_cancel, handle.cancel_reason = handle.steps, "abandoned"
                return "abandoned"
    if held is None:
        if handle.cancel_reason is not None:
            return handle.cancel_reason
        raise RemoteError("the stream ended without a finish reason")
    stop = held.stop or FROM_FINISH.get(finish, "error")
    if stop == "length" and body["max_tokens"] < spec.max_new_tokens and emitted >= body["max_tokens"]:
        stop = "context"
    last_stats = held.stats
    if metrics is not None and backend.kind == "vllm":
        last_stats = stats_from_metrics(metrics, emitted, time.perf_counter() - t0)
    elif backend.kind == "vllm":
        last_stats.elapsed_s = time.perf_counter() - t0
    handle._push(StepEvent(held.step, held.pieces, last_stats, held.timings_ms, held.draft_size, stop))
    return stop


def vllm_step(
    step: int, tokens: list[int], texts: list[str], k: int | None, method: str, stats: Stats, plain_first: bool = False
) -> StepEvent:
    """One vLLM chunk as a step: ``accepted`` tokens then the target's own (bonus or recovered);
    ``plain`` for method none and for the prefill's first token (``plain_first``)."""
    if method == "none" or not k:
        pieces = tuple(Piece(t, x, "plain", step, 0) for t, x in zip(tokens, texts))
        stats.record([], [], [], len(tokens))
        return StepEvent(step, pieces, stats.snapshot(), {}, 0)
    pieces: tuple[Piece, ...] = ()
    if plain_first:
        pieces, tokens, texts = (Piece(tokens[0], texts[0], "plain", step, 0),), tokens[1:], texts[1:]
        stats.record([], [], [], 1)
    if tokens:
        a = min(len(tokens) - 1, k)
        last = "bonus" if a == k else "recovered"
        pieces += tuple(Piece(t, x, "accepted", step, i + 1) for i, (t, x) in enumerate(zip(tokens[:a], texts[:a])))
        pieces += tuple(Piece(t, x, last, step, a + 1) for t, x in zip(tokens[a:], texts[a:]))
        stats.record(list(range(1, k + 1)), list(range(1, min(a + 1, k) + 1)), list(range(1, a + 1)), len(tokens))
    return StepEvent(step, pieces, stats.snapshot(), {}, k)


def stats_from_metrics(m: dict, emitted: int, elapsed_s: float) -> Stats:
    """Exact stats from vLLM's detailed per-request spec-decode metrics."""
    stats = Stats()
    for a, d in zip(m.get("per_step_accepted") or [], m.get("per_step_drafted") or []):
        stats.record(list(range(1, d + 1)), list(range(1, min(a + 1, d) + 1)), list(range(1, a + 1)), 0)
    stats.emitted, stats.elapsed_s = emitted, elapsed_s
    stats.target_forwards += 1  # the prefill's forward made the first token
    return stats


class _Tok:
    """The ``decode`` the Detokenizer expects, on a ``tokenizers.Tokenizer``."""

    def __init__(self, tok) -> None:
        self.tok = tok

    def decode(self, ids, skip_special_tokens=True, clean_up_tokenization_spaces=False) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=skip_special_tokens)


def make_detok(backend, ids: list[int]) -> Detokenizer:
    return Detokenizer(_Tok(backend.tokenizer), ids)
