"""A ``Backend`` on a remote OpenAI-compatible server: vLLM (``specdec vllm serve``) or ``specdec serve``.

Contract: ``RemoteBackend(url, tokenizer_dir, token=None, max_queue=64)`` implements the protocol of
``backend.py`` over streaming ``POST /v1/completions`` (stdlib ``urllib``; one thread per request,
so the server's own batching sees concurrent requests). ``ready()`` reads ``GET /v1/models``: our
server lists its methods (requests then carry ``specdec.method``); a vLLM server started by
``specdec vllm serve`` also serves the model name ``specdec-vllm-METHOD-kK``, so the one method it
runs is known (any other method is a ``ConfigError``). Prompts are tokenized here with the target's
``tokenizer.json`` and sent as token ids; ``return_token_ids`` brings the emitted ids back.

What becomes a ``StepEvent``: from vLLM, each streamed chunk is one verification step (accepted
run + the target's own token), its tokens named ``accepted`` then ``bonus`` (all k accepted) or
``recovered``; rejected tokens and p/q are never exposed by vLLM, so ``capabilities`` says
``fates=False, trees=False, corpus=False``. Chunks merge when the client lags; the last event's
``stats`` are then rebuilt from vLLM's ``per_step_accepted``/``per_step_drafted`` (the per-request
spec-decode metrics), which are exact. From our own server the step dicts carry every fate and
are passed through as they are (``fates`` is then True, ``trees`` True). No torch.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from specdec.core.config import ConfigError, check_ids
from specdec.core.methods import NAMES
from specdec.serving.backend import Busy, Capabilities, Handle, Limits, Request, ShuttingDown

VLLM_NAME = re.compile(r"^specdec-vllm-(\w+)-k(\d+)$")
REMOTE_CAPS = Capabilities(fates=False, trees=False, corpus=False)


class RemoteBackend:
    def __init__(self, url: str, tokenizer_dir: Path, token: str | None = None, max_queue: int = 64) -> None:
        from tokenizers import Tokenizer

        self.url = url.rstrip("/").removesuffix("/v1")
        self.token, self.max_queue = token, max_queue
        self.tokenizer = Tokenizer.from_file(str(Path(tokenizer_dir) / "tokenizer.json"))
        self._cond = threading.Condition()
        self.live: set[Handle] = set()
        self._closing = False
        self._arrivals = itertools.count()
        self.kind = "remote"  # "specdec" or "vllm" once ready
        self.methods: tuple[str, ...] = ()
        self.vllm_k: int | None = None
        self.capabilities = REMOTE_CAPS
        self.limits = Limits(context=0, max_queue=max_queue)
        self._ready = False

    # -- discovery ------------------------------------------------------------------------------------
    def _open(self, path: str, body: dict | None = None, timeout: float | None = 30.0):
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if body is None else json.dumps(body).encode()
        return urllib.request.urlopen(urllib.request.Request(self.url + path, data, headers), timeout=timeout)

    def wait_ready(self, timeout: float | None = 30.0) -> RemoteBackend:
        if self._ready:
            return self
        try:
            with self._open("/v1/models", timeout=timeout) as r:
                models = json.load(r)["data"]
        except (OSError, ValueError, KeyError) as e:
            raise ConnectionError(f"cannot reach an OpenAI-compatible server at {self.url}: {e}") from e
        info = next((m["specdec"] for m in models if "specdec" in m), None)
        context = int(models[0].get("max_model_len") or 0)
        if info is not None:
            self.kind, self.methods = "specdec", tuple(m for m in info["methods"] if m in NAMES)
            context = int(info["context"])
            self.capabilities = Capabilities()
        else:
            named = [VLLM_NAME.match(m["id"]) for m in models]
            found = next((m for m in named if m and m.group(1) in NAMES), None)
            self.kind = "vllm"
            self.methods = (found.group(1),) if found else ("none",)
            self.vllm_k = int(found.group(2)) if found else None
        self.limits = Limits(context=context, max_queue=self.max_queue, max_batch=self.max_queue)
        self._ready = True
        return self

    async def ready(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.wait_ready)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def token_id(self, token: str) -> int | None:
        return self.tokenizer.token_to_id(token)

    def describe(self) -> str:
        """One line for a UI: where this runs and what it cannot show."""
        where = f"{self.kind} server at {self.url}"
        if self.capabilities.fates:
            return where
        return f"{where}: rejected draft tokens, p/q and token trees are not reported by this backend"

    # -- requests -------------------------------------------------------------------------------------
    def submit(self, request: Request) -> Handle:
        self.wait_ready()
        spec = request.spec
        if spec.method not in self.methods:
            raise ConfigError(
                f"method {spec.method!r} is not available on this server; it runs: {', '.join(self.methods)}"
            )
        prompt = request.prompt
        ids = check_ids(self.encode(prompt) if isinstance(prompt, str) else prompt, self.limits.context)
        handle = Handle(request, self)
        handle._ids = ids
        with self._cond:
            if self._closing:
                raise ShuttingDown("the backend is shutting down and takes no new requests")
            if len(self.live) >= self.max_queue:
                raise Busy(f"{self.max_queue} requests are already in flight; try again later")
            handle.seq = next(self._arrivals)
            self.live.add(handle)
        threading.Thread(target=self._run, args=(handle,), name=f"remote-{handle.seq}", daemon=True).start()
        return handle

    def cancel(self, handle: Handle, reason: str = "cancelled") -> None:
        if handle.cancel_reason is None:
            handle.steps_at_cancel, handle.cancel_reason = handle.steps, reason
        resp = getattr(handle, "_resp", None)
        if resp is not None:
            try:
                resp.close()  # closing the stream makes the server abort the request
            except Exception:  # noqa: BLE001
                pass

    def shutdown(self, timeout: float | None = 60.0) -> bool:
        with self._cond:
            self._closing = True
            live = list(self.live)
        for h in live:
            self.cancel(h, "shutdown")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self.live:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def body(self, ids: list[int], spec) -> dict[str, Any]:
        s = spec.sampling
        room = self.limits.context - len(ids)
        body = {
            "model": "specdec",
            "prompt": ids,
            "max_tokens": min(spec.max_new_tokens, room),
            "temperature": s.temperature,
            "top_p": s.top_p,
            "top_k": s.top_k or -1,
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True,
        }
        if s.seed is not None:
            body["seed"] = s.seed
        if self.kind == "specdec":
            body["top_k"] = s.top_k
            ext = {"method": spec.method, "k": spec.k, "confidence": spec.confidence}
            body["specdec"] = ext | {"ngram_max": spec.ngram_max, "ngram_min": spec.ngram_min}
        return body

    def _run(self, handle: Handle) -> None:
        from specdec.serving.remote_stream import relay

        stop, error = "error", None
        try:
            handle._begin()
            stop = relay(self, handle)
        except Exception as e:  # noqa: BLE001 - one request fails, never the backend
            stop, error = ("error", e) if handle.cancel_reason is None else (handle.cancel_reason, None)
        finally:
            handle._ids = None
            handle._end(stop, error)
            with self._cond:
                self.live.discard(handle)
                self._cond.notify_all()


def backend_for(args, local):
    """``local()`` unless the parsed flags name a remote server (``--backend URL``,
    ``--backend-token``, ``$SPECDEC_BACKEND_TOKEN``): then a ready ``RemoteBackend`` on it."""
    url = getattr(args, "backend", None)
    if not url:
        return local()
    from specdec.catalog.resolve import resolve
    from specdec.core.config import ConfigError

    token = args.backend_token or os.environ.get("SPECDEC_BACKEND_TOKEN") or None
    # the tokenizer of the model the flags name (--target, else --model, else the command's default)
    target = resolve(
        getattr(args, "model", None),
        getattr(args, "target", None),
        None,
        True,
        default=getattr(args, "default_model", "tiny"),
    ).target
    try:
        return RemoteBackend(url, target, token).wait_ready()
    except ConnectionError as e:
        raise ConfigError(str(e)) from None
