"""The pygls language server: thin handlers over ``specdec.lsp.completion`` and ``specdec.lsp.completer``.

Contract:
- ``initialize`` answers at once and reads ``initializationOptions``; the model loads on the
  backend's model thread (``specdec.serving.local.LocalBackend(loader=...)``) once the client
  sends ``initialized``, with work-done progress in the editor and ``window/showMessage`` on a
  failure (``specdec.lsp.startup``). Until it is ready, completions get an empty, incomplete answer
  at once. ``wait_for_model: true`` in ``initializationOptions`` makes ``initialize`` answer only
  once the model is loaded (scripts and benchmarks). ``workspace/didChangeConfiguration`` updates
  the settings.
  Bad settings are reported with ``window/showMessage`` and the previous ones stay in force.
- ``textDocument/completion`` answers one item whose ``insertText`` is the model's continuation
  at the cursor (its ``textEdit`` replaces the word before the cursor with that word plus the
  continuation, so clients that filter by the word keep it); ``textDocument/inlineCompletion``
  answers one item with the continuation as ``insertText`` at the cursor.
- Unknown documents, positions outside the document, empty or undecodable text get an empty
  answer, never an error that stops the server. ``$/cancelRequest`` stops the generation between
  engine steps and the client gets RequestCancelled (-32800); a newer request for the same
  document stops an older one between steps and the older one gets an empty, incomplete list.
- With ``initializationOptions: {"telemetry": true}``, a ``specdec/stats`` notification follows
  every completion request: uri, method, source (model or cache), outcome (done, cancelled,
  superseded, filtered), text, tokens, steps, tau, alpha, ms (from the request's arrival),
  confidence (``specdec.lsp.quiet.confidence`` of the text; null where no token reports one).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer

from specdec.lsp.completer import Completer, Outcome
from specdec.lsp.completion import Options, TypeAhead, current_line, offset_at, word_before
from specdec.lsp.progress import Progress
from specdec.lsp.protocol import SpecdecProtocol
from specdec.lsp.quiet import confidence, repetitive, unsure
from specdec.lsp.shared import Shared
from specdec.lsp.startup import Gate, Loading
from specdec.lsp.suffix import merge, rest_of_line
from specdec.serving.backend import Busy
from specdec.serving.local import LocalBackend

log = logging.getLogger("specdec.lsp")
STATS = "specdec/stats"
MODEL_NOTE = (
    "specdec lsp: backend %s, methods %s. The shipped models (assets/) are tiny and trained here: "
    "an 8.7M-parameter target and a 0.9M draft, trained on the Python files installed on the "
    "machine that built them (docs/training.md): expect rough completions. For real ones, start "
    "the server with --model NAME (an installed catalogue model: specdec models), or --target DIR "
    "(a local Hugging Face causal LM folder) and --draft DIR (a smaller model with the same "
    "tokenizer) or --no-draft; see docs/lsp.md"
)
REAL_NOTE = "specdec lsp: backend %s, %s"
NOT_READY = ("", "", "")  # complete()'s answer while the model loads: empty, and the client asks again


class SpecdecServer(LanguageServer):
    def __init__(
        self, loader: Any, defaults: Options = Options(), backend: Any = None, gate: Gate | None = None
    ) -> None:
        super().__init__("specdec", "0.1", protocol_cls=SpecdecProtocol)
        self.gate = gate or Gate()  # the loader runs once it opens: on ``initialized`` (startup.py)
        self.loading = Loading(self)
        self.options = defaults
        self.typeahead = TypeAhead()
        self.shared = Shared()
        self.filtered = 0  # completions the quiet filter held back
        self.client_info: t.ClientInfo | None = None
        self.latest: dict[str, int] = {}
        self.seq = 0
        self.completer: Completer | None = None
        # any specdec.serving.backend.Backend (whose loader, if any, waits on ``gate``); by default the
        # in-process one, whose model thread loads the models once the gate opens
        self.backend = backend if backend is not None else LocalBackend(loader=self.gate.then(loader))

    def start_io(self, stdin=None, stdout=None) -> None:
        """Serve over stdio, stdin read on the event loop (``specdec/lsp/stdio.py``: no thread per read)."""
        from specdec.lsp.stdio import start_io

        start_io(self, stdin, stdout)

    def loaded(self) -> None:
        """The backend is ready (``startup.Loading``): completions run from now on."""
        if self.completer is not None:
            return
        self.completer = Completer(self.backend)
        methods = self.backend.methods
        if self.options.method not in (None, *methods):
            message = f"method {self.options.method!r} is not available ({', '.join(methods)}); using the default"
            log.error(message)
            self.window_show_message(t.ShowMessageParams(t.MessageType.Error, "specdec: " + message))
            self.options = replace(self.options, method=None)
        name = getattr(self.backend, "name", type(self.backend).__name__)
        if getattr(getattr(self.backend, "engine", None), "model_name", None) in (None, "tiny"):
            log.warning(MODEL_NOTE, name, ", ".join(methods))  # the shipped model (or one that cannot say)
        else:
            log.warning(REAL_NOTE, name, self.model_label())

    def model_label(self) -> str:
        model = getattr(getattr(self.backend, "engine", None), "model_name", None)
        return f"model {model or getattr(self.backend, 'name', 'remote')}, methods {', '.join(self.backend.methods)}"

    def configure(self, data: Any, initial: bool = False) -> None:
        """Apply every valid setting; one ``window/showMessage`` error names each bad one."""
        methods = self.backend.methods if self.completer else None  # None: checked once loaded
        new, errors = self.options.applied(data, methods)
        if not initial and new.telemetry != self.options.telemetry:
            errors.append("telemetry is set in initializationOptions only")
            new = replace(new, telemetry=self.options.telemetry)
        self.options = new
        if errors:
            self.window_show_message(t.ShowMessageParams(t.MessageType.Error, "specdec: " + "; ".join(errors)))

    def simple_client(self) -> bool:
        """True for clients whose completion list cannot insert several lines or replace text
        after the cursor (Neovim before 0.11: its omnifunc inserts a NUL for every newline), from
        the ``multiline`` setting or else the client's name, version and snippet support."""
        if self.options.multiline is not None:
            return not self.options.multiline
        info = self.client_info
        if info is not None and info.name == "Neovim":
            try:
                major, minor = (int(x) for x in (info.version or "0.0").split(".")[:2])
            except ValueError:
                major, minor = 0, 0
            if (major, minor) < (0, 11):
                return True
        item = getattr(
            getattr(getattr(self.client_capabilities, "text_document", None), "completion", None),
            "completion_item",
            None,
        )
        return getattr(item, "snippet_support", None) is False

    def text_before(self, uri: str, pos: t.Position) -> tuple[str, str] | None:
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return None
        text = doc.source
        encoding = self.workspace.position_encoding
        encoding = str(getattr(encoding, "value", encoding) or "utf-16")
        offset = offset_at(text, pos.line, pos.character, encoding)
        return None if offset is None else (text[:offset], text[offset:])

    def others(self, uri: str) -> list[tuple[str, int, str]]:
        docs = self.workspace.text_documents
        return [(u, d.version or 0, d.source) for u, d in reversed(docs.items()) if u != uri]

    async def complete(
        self, uri: str, pos: t.Position, token: t.ProgressToken | None = None
    ) -> tuple[str, str, str] | None:
        """(prefix, completion, the text after the cursor) or None; raises CancelledError when
        the client cancels. Requests for the same document, text and settings share one run."""
        t0 = time.perf_counter()
        completer = self.completer
        if completer is None:  # still loading (or never asked to: a client without ``initialized``)
            self.loading.start()
            return NOT_READY
        got = self.text_before(uri, pos)
        if got is None:
            return None
        prefix, after = got
        opts = self.options
        key = (opts.stop, opts.max_new_tokens, opts.temperature, opts.heal, opts.repeat_limit, opts.min_confidence)
        rest = self.typeahead.rest(uri, prefix, key) if opts.cache else None
        if rest is not None:
            self.notify_stats(uri, opts, "cache", "done", Outcome(rest, None), t0)
            return prefix, rest, after
        doc = self.workspace.text_documents.get(uri)
        share = (uri, getattr(doc, "version", None), prefix, rest_of_line(after), opts)
        text = await self.shared.get(share, lambda: self._generate(completer, uri, prefix, after, opts, key, token, t0))
        return None if text is None else (prefix, text, after)

    async def _generate(self, completer, uri, prefix, after, opts, key, token, t0) -> str | None:
        self.seq += 1
        self.latest[uri] = seq = self.seq
        try:
            others = self.others(uri) if opts.lookup_documents else []
            job = await asyncio.to_thread(completer.prepare, prefix, after, others, opts)
        except ValueError as e:  # ConfigError: empty prompt, no room
            log.info("no completion: %s", e)
            return None
        progress = Progress(self, token, job.method)
        try:
            out = await completer.run(job, lambda: self.latest.get(uri) != seq, progress.step, key=uri)
        except Busy as e:  # the backend's queue is full: no suggestion this time
            log.info("no completion: %s", e)
            return None
        except asyncio.CancelledError:
            self.notify_stats(uri, opts, "model", "cancelled", Outcome(None, job.stats), t0, job.method)
            raise
        finally:
            progress.end()
        if out.text is None:
            self.notify_stats(uri, opts, "model", "superseded", out, t0, job.method)
            return ""
        if repetitive(out.text, opts.repeat_limit) or unsure(out.text, out.spans, opts.min_confidence):
            self.filtered += 1
            self.notify_stats(uri, opts, "model", "filtered", out, t0, job.method)
            return ""
        self.typeahead.remember(uri, prefix, out.text, key)
        self.notify_stats(uri, opts, "model", "done", out, t0, job.method)
        return out.text

    def shape(self, text: str, after: str, prefix: str = "") -> tuple[str, int]:
        """(text to insert, characters after the cursor it replaces) for this client: merged
        with the rest of the line (``specdec.lsp.suffix``; ``prefix`` tells whether the cursor is in
        a string); one line and no replacing for simple clients."""
        rest = rest_of_line(after)
        simple = self.simple_client()
        if simple:
            text = text.split("\n", 1)[0]
        return merge(text, rest, type_over=not simple, before=current_line(prefix))

    def notify_stats(
        self, uri: str, opts: Options, source: str, outcome: str, out: Outcome, t0: float, method: str | None = None
    ) -> None:
        """The ``specdec/stats`` notification, when the client asked for telemetry."""
        if not opts.telemetry:
            return
        s = out.stats
        self.protocol.notify(
            STATS,
            {
                "uri": uri,
                "method": method,
                "source": source,
                "outcome": outcome,
                "text": out.text,
                "tokens": s.emitted if s else 0,
                "steps": s.steps if s else 0,
                "tau": s.tau if s else None,
                "alpha": s.alpha if s else None,
                "ms": 1000 * (time.perf_counter() - t0),
                "confidence": confidence(out.spans, len(out.text or "")),
            },
        )


def _word_start(pos: t.Position, word: str) -> t.Position:
    return t.Position(pos.line, max(0, pos.character - len(word.encode("utf-16-le")) // 2))


def create(loader: Any, defaults: Options = Options(), backend: Any = None, gate: Gate | None = None) -> SpecdecServer:
    server = SpecdecServer(loader, defaults, backend, gate)

    @server.feature(t.INITIALIZE)
    async def initialize(ls: SpecdecServer, params: t.InitializeParams) -> None:
        ls.client_info = params.client_info
        ls.configure(params.initialization_options, initial=True)
        if ls.options.wait_for_model:  # the old way, for scripts: answer once the model is loaded
            ls.gate.open()
            await ls.backend.ready()
            ls.loaded()

    @server.feature(t.INITIALIZED)
    def initialized(ls: SpecdecServer, params: t.InitializedParams) -> None:
        ls.loading.start()  # the model loads now, with progress in the editor

    @server.feature(t.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: SpecdecServer, params: t.DidChangeConfigurationParams) -> None:
        ls.configure(params.settings)

    @server.feature(t.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: SpecdecServer, params: t.DidCloseTextDocumentParams) -> None:
        ls.typeahead.forget(params.text_document.uri)
        if ls.completer is not None:
            ls.completer.forget(params.text_document.uri)

    @server.feature(t.TEXT_DOCUMENT_COMPLETION, t.CompletionOptions(trigger_characters=[".", "(", "[", ",", "="]))
    async def completion(ls: SpecdecServer, params: t.CompletionParams) -> t.CompletionList:
        got = await ls.complete(params.text_document.uri, params.position, params.work_done_token)
        if got is None:
            return t.CompletionList(is_incomplete=False, items=[])
        prefix, text, after = got
        text, replace_n = ls.shape(text, after, prefix) if text else ("", 0)
        if not text.strip():
            return t.CompletionList(is_incomplete=True, items=[])
        word = word_before(prefix)
        label = (word + text).strip().split("\n")[0][:80] or text[:80]
        end = t.Position(params.position.line, params.position.character + _units(rest_of_line(after)[:replace_n]))
        edit = t.TextEdit(t.Range(_word_start(params.position, word), end), word + text)
        item = t.CompletionItem(
            label=label,
            kind=t.CompletionItemKind.Text,
            detail="specdec",
            insert_text=text,
            filter_text=word + text,
            text_edit=edit,
            sort_text="0",
            insert_text_format=t.InsertTextFormat.PlainText,
            preselect=True,
            documentation=current_line(prefix) + text,
        )
        return t.CompletionList(is_incomplete=True, items=[item])

    @server.feature(t.TEXT_DOCUMENT_INLINE_COMPLETION, t.InlineCompletionOptions())
    async def inline_completion(ls: SpecdecServer, params: t.InlineCompletionParams) -> t.InlineCompletionList:
        got = await ls.complete(params.text_document.uri, params.position, params.work_done_token)
        if got is None or not got[1]:
            return t.InlineCompletionList(items=[])
        text, replace_n = merge(got[1], rest_of_line(got[2]), before=current_line(got[0]))  # may hold several lines
        if not text.strip():
            return t.InlineCompletionList(items=[])
        end = t.Position(params.position.line, params.position.character + _units(rest_of_line(got[2])[:replace_n]))
        item = t.InlineCompletionItem(insert_text=text, range=t.Range(params.position, end))
        return t.InlineCompletionList(items=[item])

    return server


def _units(text: str) -> int:
    """UTF-16 code units of ``text`` (LSP positions)."""
    return len(text.encode("utf-16-le")) // 2
