"""From an editor's documents to engine requests, and running them so they can be stopped between steps.

Contract:
- ``Completer.prepare(prefix, after, others, options)`` (call it on the worker thread) builds a
  ``Job``: the token window the model sees (``completion.tail`` then ``completion.trim``), the
  ``GenerateSpec`` and, for method ``lookup`` with ``lookup_documents`` on, a ``DocumentLookup``
  over the rest of the document and the other open documents. It raises ``ConfigError`` for an
  empty prompt.
- ``Completer.run(job, stale)`` (a coroutine) pulls the engine's stream one step at a time on ONE
  dedicated worker thread, so a cancel (``asyncio.CancelledError``) lands between steps; it
  stops as soon as ``completion.cut`` says the continuation ended, or ``stale()`` turns true (a
  newer request for the same document); the generator is always closed on that same thread
  (``Engine.stream`` cannot be closed from another thread while a step runs). Jobs take turns
  (an asyncio lock held until the close is queued), so the engine lock is free again before any
  later job's first step: two streams interleaved on the one worker would deadlock on it.
"""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from .completion import Options, current_line, cut, finish, indent_of, tail, trim

CORPUS_CHARS = 32_000  # text around the window, per document, that prompt lookup may copy from
MAX_OTHERS = 8  # other open documents lookup may copy from (the most recently opened)


def clean(text: str) -> str:
    """Text the tokenizer accepts: lone surrogates (from a non-UTF-8 file) become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


@dataclass
class Job:
    ids: list[int]
    spec: Any  # engine.config.GenerateSpec
    proposer: Any | None  # a proposer for this request, or None for the method's own
    mode: str
    base_indent: int
    method: str
    stats: Any | None = None  # engine.events.Stats after the latest step (progress, even if stopped)


@dataclass
class Outcome:
    text: str | None  # None: stopped because a newer request superseded it
    stats: Any | None  # engine.events.Stats of the last step, None if no step ran


class Completer:
    def __init__(self, engine: Any, worker: ThreadPoolExecutor | None = None) -> None:
        self.engine = engine
        self.worker = worker or ThreadPoolExecutor(1, thread_name_prefix="specdec-engine")
        self._others: dict[str, tuple[int, Any]] = {}  # uri -> (version, token ids)
        self._turn: asyncio.Lock | None = None

    def encode(self, text: str) -> list[int]:
        """Token ids as ``tokenizer.encode(text, add_special_tokens=False)``, without its length warning."""
        if not text:
            return []
        fast = getattr(self.engine.tokenizer, "backend_tokenizer", None)
        if fast is not None:
            return fast.encode(clean(text), add_special_tokens=False).ids
        return self.engine.tokenizer.encode(clean(text), add_special_tokens=False)

    def prepare(self, prefix: str, after: str, others: list[tuple[str, int, str]], options: Options) -> Job:
        from engine.config import ConfigError, GenerateSpec, SamplingParams
        window = self.engine.context - options.max_new_tokens - 1
        if window < 16:
            raise ConfigError(f"max_new_tokens {options.max_new_tokens} leaves no room for context "
                              f"in a {self.engine.context}-token model")
        start = tail(prefix, window * 6)
        ids = self.encode(prefix[start:])
        drop = trim(ids, window)
        head, ids = ids[:drop], ids[drop:]
        if not ids:
            raise ConfigError("the prompt is empty")
        method = options.resolved_method(self.engine.methods)
        sampling = SamplingParams(temperature=float(options.temperature))
        spec = GenerateSpec(method=method, k=options.k, max_new_tokens=options.max_new_tokens, sampling=sampling)
        proposer = None
        if method == "lookup" and options.lookup_documents:
            from .lookup import DocumentLookup
            corpus = [self.encode(prefix[max(0, start - CORPUS_CHARS):start]) + head,
                      self.encode(after[:CORPUS_CHARS])] + self._other_ids(others)
            proposer = DocumentLookup(8 if spec.k == "auto" else int(spec.k), spec.ngram_max, spec.ngram_min, corpus)
        return Job(ids, spec, proposer, options.stop, indent_of(current_line(prefix)), method)

    def _other_ids(self, others: list[tuple[str, int, str]]) -> list[Any]:
        out = []
        for uri, version, text in others[:MAX_OTHERS]:
            cached = self._others.get(uri)
            if cached is None or cached[0] != version:
                cached = (version, self.encode(text[:CORPUS_CHARS]))
                self._others[uri] = cached
            out.append(cached[1])
        return out

    async def call(self, fn: Callable, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.worker, fn, *args)

    async def run(self, job: Job, stale: Callable[[], bool], on_step: Callable[[Any], None] | None = None) -> Outcome:
        if self._turn is None:
            self._turn = asyncio.Lock()
        async with self._turn:  # one stream at a time: another's first step would wait on engine.lock forever
            if stale():  # superseded while it waited for its turn
                return Outcome(None, None)
            return await self._run(job, stale, on_step)

    async def _run(self, job: Job, stale: Callable[[], bool], on_step: Callable[[Any], None] | None) -> Outcome:
        it = self.engine.stream(job.ids, job.spec, job.proposer)
        text, stats = "", None
        try:
            while True:
                ev = await self.call(next, it, None)
                if ev is None:
                    return Outcome(finish(text, job.mode, job.base_indent), stats)
                text, stats = text + ev.text, ev.stats
                job.stats = stats
                if on_step is not None:
                    on_step(stats)
                done = cut(text, job.mode, job.base_indent)
                if done is not None:
                    return Outcome(done, stats)
                if ev.stop is not None:
                    return Outcome(finish(text, job.mode, job.base_indent), stats)
                if stale():
                    return Outcome(None, stats)
        finally:
            self.worker.submit(it.close)  # same thread as the steps, after the running one
