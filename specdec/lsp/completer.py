"""From an editor's documents to backend requests, and running them so they can be stopped between steps.

Contract:
- ``Completer(backend).prepare(prefix, after, others, options)`` (any thread) builds a ``Job``:
  the token window the model sees (``completion.tail`` then ``completion.trim``), the
  ``GenerateSpec`` (with ``heal``, the back-off of ``specdec.core.healing.split``, where the backend
  offers token healing; the continuation then starts right after the cursor) and, for method
  ``lookup`` with ``lookup_documents`` on, the corpus prompt lookup may also copy from (the rest
  of the document, then the other open documents; see
  ``specdec.core.seq.find_continuation``). Where the model has fill-in-the-middle tokens
  (``fim()``; option ``fim``) the window is ``<prefix> before <suffix> after <middle>``
  (specdec/lsp/fim.py). It raises ``ConfigError`` for an empty prompt. With text after the
  cursor on its line, the stop mode is ``line``. ``forget(uri)`` drops what is kept
  for a closed document: its cached token ids, and, where the backend offers ``drop_prefix``
  (the in-process one), the target's kept prefix states of its last prompt.
- ``Completer.run(job, stale, on_step)`` (a coroutine) submits the job and reads its events; it
  cancels the request as soon as ``completion.cut`` says the continuation ended, the text so far is
  already junk (``quiet.EarlyJunk`` with the job's ``repeat_limit``: the outcome's text is then
  that junk, which the server's filter answers with nothing), ``stale()`` turns
  true (a newer request for the same document), or the coroutine itself is cancelled
  (``$/cancelRequest``). The backend ends a cancelled request between steps, also while it waits
  in the queue, so requests from several documents simply queue there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specdec.lsp.completion import Options, current_line, cut, finish, indent_of, tail, trim
from specdec.lsp.fim import SUFFIX_CHARS, fim_tokens, layout
from specdec.lsp.quiet import EarlyJunk
from specdec.lsp.suffix import rest_of_line
from specdec.serving.backend import Request

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
    spec: Any  # specdec.core.config.GenerateSpec
    corpus: tuple  # token sequences prompt lookup may also copy from
    mode: str
    base_indent: int
    method: str
    stats: Any | None = None  # specdec.core.events.Stats after the latest step (progress, even if stopped)
    repeat_limit: int = 0  # specdec.lsp.quiet's repetition rule, to stop a completion that is already junk


@dataclass
class Outcome:
    text: str | None  # None: stopped because a newer request superseded it
    stats: Any | None  # specdec.core.events.Stats of the last step, None if no step ran
    spans: tuple = ()  # (start, length, logp) per emitted token with a logp (specdec.lsp.quiet.confidence)


class Completer:
    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self._others: dict[str, tuple[int, Any]] = {}  # uri -> (version, token ids)
        self._live: dict[Any, Any] = {}  # key -> the handle of its latest run
        self._prompts: dict[Any, list[int]] = {}  # key (uri) -> the token ids of its latest run

    def encode(self, text: str) -> list[int]:
        """Token ids as ``tokenizer.encode(text, add_special_tokens=False)``, without its length warning."""
        return self.backend.encode(clean(text)) if text else []

    def fim(self) -> tuple[int, int, int] | None:
        """The backend model's fill-in-the-middle token ids, if it has them (looked up once)."""
        if not hasattr(self, "_fim"):
            token_id = getattr(self.backend, "token_id", None)
            self._fim = fim_tokens(token_id) if token_id is not None else None
        return self._fim

    def forget(self, uri: str) -> None:
        """Drop what is kept for a closed document: its token ids for prompt lookup, and the
        target's prefix states of its last prompt where the backend can (``drop_prefix``)."""
        self._others.pop(uri, None)
        ids = self._prompts.pop(uri, None)
        drop = getattr(self.backend, "drop_prefix", None)
        if ids and drop is not None:
            drop(ids)

    def prepare(self, prefix: str, after: str, others: list[tuple[str, int, str]], options: Options) -> Job:
        from specdec.core.config import ConfigError, GenerateSpec, SamplingParams

        context = self.backend.limits.context
        window = context - options.max_new_tokens - 1
        if window < 16:
            raise ConfigError(
                f"max_new_tokens {options.max_new_tokens} leaves no room for context in a {context}-token model"
            )
        start = tail(prefix, window * 6)
        heal_at = len(prefix)
        if options.heal and getattr(self.backend.capabilities, "heal", False):
            from specdec.core.healing import split

            heal_at = max(start, split(prefix))  # back off to a boundary the model knows
        ids = self.encode(prefix[start:heal_at])
        if not ids:  # the whole window is the heal text: nothing to back off to
            heal_at, ids = len(prefix), self.encode(prefix[start:])
        fim = self.fim() if options.fim else None
        if fim is not None:
            pre = ids
            ids, drop = layout(pre, self.encode(after[:SUFFIX_CHARS]), fim, window)
            head = pre[:drop]
        else:
            drop = trim(ids, window)
            head, ids = ids[:drop], ids[drop:]
        if not ids:
            raise ConfigError("the prompt is empty")
        method = options.resolved_method(self.backend.methods)
        sampling = SamplingParams(temperature=float(options.temperature))
        spec = GenerateSpec(
            method=method, k=options.k, max_new_tokens=options.max_new_tokens, sampling=sampling, heal=prefix[heal_at:]
        )
        corpus: tuple = ()
        if method == "lookup" and options.lookup_documents and self.backend.capabilities.corpus:
            import numpy as np

            seqs = [
                self.encode(prefix[max(0, start - CORPUS_CHARS) : start]) + head,
                self.encode(after[:CORPUS_CHARS]),
            ] + self._other_ids(others)
            corpus = tuple(np.asarray(c, dtype=np.int64) for c in seqs if len(c))
        mode = options.stop if not rest_of_line(after).strip() else "line"  # mid-line: one line
        return Job(ids, spec, corpus, mode, indent_of(current_line(prefix)), method, repeat_limit=options.repeat_limit)

    def _other_ids(self, others: list[tuple[str, int, str]]) -> list[Any]:
        out = []
        for uri, version, text in others[:MAX_OTHERS]:
            cached = self._others.get(uri)
            if cached is None or cached[0] != version:
                cached = (version, self.encode(text[:CORPUS_CHARS]))
                self._others[uri] = cached
            out.append(cached[1])
        return out

    def _submit(self, job: Job) -> Any:
        """The backend request; where the backend offers it (``stops_early``), the model thread
        itself stops the request at the step whose text ends the completion (``cut``), so no
        step is computed after the answer is known (it used to run one more, 10-17 ms, while the
        answer went out and before the next request could start)."""
        request = Request(job.ids, job.spec, job.corpus)
        if not getattr(self.backend, "stops_early", False):
            return self.backend.submit(request)
        seen = [""]

        def until(ev: Any) -> bool:  # on the model thread
            seen[0] += ev.text
            return cut(seen[0], job.mode, job.base_indent) is not None

        return self.backend.submit(request, until=until)

    async def run(
        self, job: Job, stale: Callable[[], bool], on_step: Callable[[Any], None] | None = None, key: Any = None
    ) -> Outcome:
        """``key`` (a document uri): a newer run with the same key cancels this one, queued or running."""
        if stale():  # superseded before it was sent
            return Outcome(None, None)
        handle = self._submit(job)
        if key is not None:
            self._prompts[key] = job.ids
            older = self._live.get(key)
            if older is not None and not older.ended:
                older.cancel("superseded")
            self._live[key] = handle
        text, stats, last, spans = "", None, None, []
        junk = EarlyJunk(job.repeat_limit)
        try:
            async for ev in handle:
                _spans(spans, len(text), ev)
                text, stats, last = text + ev.text, ev.stats, ev.stop
                job.stats = stats
                if on_step is not None:
                    on_step(stats)
                done = cut(text, job.mode, job.base_indent)
                if done is not None:
                    return Outcome(done, stats, tuple(spans))
                if ev.stop is not None:
                    return Outcome(finish(text, job.mode, job.base_indent), stats, tuple(spans))
                if junk(text):  # already junk by the filter's rule: stop decoding (the server filters it)
                    return Outcome(text, stats, tuple(spans))
                if stale():
                    return Outcome(None, stats)
            if handle.stop == "until":  # the model thread saw the cut first: the loop above returns
                return Outcome(finish(text, job.mode, job.base_indent), stats, tuple(spans))
            if handle.stop == "superseded" or stale():
                return Outcome(None, stats)
            return Outcome(finish(text, job.mode, job.base_indent), stats, tuple(spans))
        finally:
            if last is None and not handle.ended:  # we stopped reading early: stop decoding too
                handle.cancel()
            if key is not None and self._live.get(key) is handle:
                del self._live[key]


def _spans(spans: list, start: int, ev: Any) -> None:
    """Append (start, length, logp) for each emitted token of ``ev`` whose logp the step reports."""
    pieces = ev.emitted
    logp = getattr(ev, "logp", ())
    if len(logp) != len(pieces):
        return  # not reported (the healing step, a backend without it)
    for pc, lp in zip(pieces, logp):
        spans.append((start, len(pc.text), lp))
        start += len(pc.text)
