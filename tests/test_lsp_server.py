"""End to end: `specdec lsp` driven over stdio by pytest-lsp's real LSP client (one server process).

The expected continuation is the engine's own temperature-0 output for the same prefix (the
shipped models, loaded in this process), cut at the stop mode's end.
"""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
import pytest_lsp
from lsprotocol import types as t
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient

from specdec.core import healing
from specdec.core.config import GenerateSpec
from specdec.models.loading import ASSETS

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

DOC = json.loads((ASSETS / "prompts" / "code.jsonl").read_text(encoding="utf-8").splitlines()[0])["prompt"]
LINES = DOC.split("\n")
DEF_LINE = next(i for i, ln in enumerate(LINES) if ln.startswith("def compress("))


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=[sys.executable, "-m", "specdec", "lsp"]))
async def client(lsp_client: LanguageClient):
    lsp_client.stats = []
    lsp_client.feature("specdec/stats")(lambda params: lsp_client.stats.append(params))
    lsp_client.init_result = await lsp_client.initialize_session(
        t.InitializeParams(
            capabilities=pytest_lsp.client_capabilities("neovim"),
            initialization_options={"telemetry": True, "wait_for_model": True},
        )
    )
    yield
    await lsp_client.shutdown_session()


def healed(engine, prefix: str, max_new_tokens: int, heal: bool = True) -> str:
    """The engine's greedy continuation of ``prefix`` with token healing (specdec/core/healing.py), or
    without it (``heal=False``: what a backend without ``Capabilities.heal`` completes)."""
    if not heal:
        return engine.generate(prefix, GenerateSpec(method="none", max_new_tokens=max_new_tokens)).text
    cut = healing.split(prefix)
    spec = GenerateSpec(method="none", max_new_tokens=max_new_tokens, heal=prefix[cut:])
    return engine.generate(prefix[:cut], spec).text


def expected(engine, prefix: str, mode: str, max_new_tokens: int = 48, heal: bool = True) -> str:
    """`specdec generate` at temperature 0 (healed), cut as docs/lsp.md says the stop modes cut."""
    text = healed(engine, prefix, max_new_tokens, heal)
    if not text.strip():
        return ""
    lines = text.split("\n")
    if mode == "line":
        return text if len(lines) == 1 else (lines[0] if lines[0].strip() else "")
    first = next((i for i, ln in enumerate(lines) if ln.strip()), len(lines))
    if first >= len(lines) - 1:
        return text.rstrip()
    base = len(LINES[DEF_LINE]) - len(LINES[DEF_LINE].lstrip())
    for i in range(first + 1, len(lines)):
        if lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) <= base:
            return "\n".join(lines[:i]).rstrip()
    return text.rstrip()


def open_doc(client: LanguageClient, uri: str, text: str) -> None:
    client.text_document_did_open(t.DidOpenTextDocumentParams(t.TextDocumentItem(uri, "python", 1, text)))


def configure(client: LanguageClient, **settings) -> None:
    client.workspace_did_change_configuration(t.DidChangeConfigurationParams(settings={"specdec": settings}))


async def complete(client: LanguageClient, uri: str, line: int, char: int) -> t.CompletionList:
    return await client.text_document_completion_async(
        t.CompletionParams(t.TextDocumentIdentifier(uri), t.Position(line, char))
    )


async def inline(client: LanguageClient, uri: str, line: int, char: int) -> t.InlineCompletionList:
    return await client.text_document_inline_completion_async(
        t.InlineCompletionParams(
            t.InlineCompletionContext(t.InlineCompletionTriggerKind.Invoked),
            t.TextDocumentIdentifier(uri),
            t.Position(line, char),
        )
    )


async def wait_for(predicate, what: str, seconds: float = 120.0):
    for _ in range(int(seconds / 0.01)):
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_initialize_advertises_completion_and_inline_completion(client: LanguageClient):
    caps = client.init_result.capabilities
    assert caps.completion_provider is not None and caps.inline_completion_provider


async def test_completion_is_the_engines_greedy_continuation_for_every_method(client: LanguageClient, engine):
    uri = "file:///exact.py"
    open_doc(client, uri, DOC)
    col = len("def comp")
    want_line = expected(engine, "\n".join(LINES[:DEF_LINE]) + "\n" + LINES[DEF_LINE][:col], "line", 16)
    assert want_line
    for method in engine.methods:
        configure(client, method=method, stop="line", cache=False, max_new_tokens=16)
        got = await complete(client, uri, DEF_LINE, col)
        assert [i.insert_text for i in got.items] == [want_line], method
        assert client.stats[-1].method == method and client.stats[-1].source == "model"
    item = got.items[0]
    assert item.text_edit.new_text == "comp" + want_line and item.text_edit.range.start.character == 4
    assert [i.insert_text for i in (await inline(client, uri, DEF_LINE, col)).items] == [want_line]
    configure(client, method="lookup", stop="block", cache=False, max_new_tokens=48)
    want_block = expected(engine, "\n".join(LINES[: DEF_LINE + 1]), "block")
    got = await complete(client, uri, DEF_LINE, len(LINES[DEF_LINE]))
    assert [i.insert_text for i in got.items] == [want_block] and "\n" in want_block.strip("\n")
    configure(client, stop="line", cache=True, method=None)


async def test_typed_ahead_characters_are_served_from_the_cache(client: LanguageClient):
    uri = "file:///typeahead.py"
    text = "\n".join(LINES[: DEF_LINE + 1]) + "\n"
    open_doc(client, uri, text)
    first = (await complete(client, uri, DEF_LINE + 1, 0)).items[0].insert_text
    assert len(first.lstrip()) >= 3 and client.stats[-1].source == "model"
    typed = first[: len(first) - len(first.lstrip()) + 2]
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            t.VersionedTextDocumentIdentifier(version=2, uri=uri),
            [
                t.TextDocumentContentChangePartial(
                    t.Range(t.Position(DEF_LINE + 1, 0), t.Position(DEF_LINE + 1, 0)), typed
                )
            ],
        )
    )
    line, col = DEF_LINE + 1 + typed.count("\n"), len(typed.split("\n")[-1])
    rest = (await inline(client, uri, line, col)).items[0].insert_text
    assert typed + rest == first and client.stats[-1].source == "cache"
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            t.VersionedTextDocumentIdentifier(version=3, uri=uri),
            [t.TextDocumentContentChangePartial(t.Range(t.Position(line, col), t.Position(line, col)), "Zq")],
        )
    )
    await complete(client, uri, line, col + 2)
    assert client.stats[-1].source == "model"  # typed something else: the model runs


async def _start_long(client: LanguageClient, uri: str, token: str):
    configure(client, stop="block", max_new_tokens=256, cache=False, method="none")
    open_doc(client, uri, DOC + "\n")  # the cursor on an empty last line: nothing after it
    client.progress_reports[token] = []
    fut = asyncio.ensure_future(
        client.protocol.send_request_async(
            t.TEXT_DOCUMENT_COMPLETION,
            t.CompletionParams(t.TextDocumentIdentifier(uri), t.Position(len(LINES), 0), work_done_token=token),
            msg_id=token,
        )
    )
    await wait_for(lambda: len(client.progress_reports[token]) >= 2, "the generation to start")
    return fut


async def test_cancel_request_stops_the_generation_between_steps(client: LanguageClient):
    fut = await _start_long(client, "file:///cancel.py", "cancel-1")
    client.protocol.notify(t.CANCEL_REQUEST, t.CancelParams(id="cancel-1"))
    with pytest.raises(JsonRpcException) as err:
        await fut
    assert err.value.code == -32800
    stats = await wait_for(lambda: [s for s in client.stats if s.uri == "file:///cancel.py"], "stats")
    assert stats[-1].outcome == "cancelled" and stats[-1].tokens < 256
    assert isinstance(client.progress_reports["cancel-1"][-1], t.WorkDoneProgressEnd)
    configure(client, stop="line", max_new_tokens=48, cache=True, method=None)
    assert (await complete(client, "file:///cancel.py", DEF_LINE, 4)).items  # still serving


async def test_a_newer_request_for_the_same_document_supersedes_the_older(client: LanguageClient):
    uri = "file:///supersede.py"
    old = await _start_long(client, uri, "old-1")
    configure(client, stop="line", max_new_tokens=48, cache=False, method=None)
    new = await complete(client, uri, DEF_LINE, 4)
    older = await old
    assert not older.items and older.is_incomplete and new.items
    outcomes = [s.outcome for s in client.stats if s.uri == uri]
    assert outcomes[0] == "superseded" and outcomes[-1] == "done"
    configure(client, cache=True)


async def test_bad_inputs_get_empty_answers_and_the_server_keeps_serving(client: LanguageClient):
    assert not (await complete(client, "file:///never-opened.py", 0, 0)).items
    open_doc(client, "file:///small.py", "x = 1\n")
    assert not (await complete(client, "file:///small.py", 5, 0)).items  # line outside the document
    open_doc(client, "file:///empty.py", "")
    assert not (await complete(client, "file:///empty.py", 0, 0)).items
    assert not (await inline(client, "file:///empty.py", 0, 0)).items
    open_doc(client, "file:///odd.py", "s = '\udcff\ufffd😋'\nimport os\nos.")  # lone surrogate, emoji
    assert len((await complete(client, "file:///odd.py", 2, 99)).items) <= 1  # past the line end: the end
    open_doc(client, "file:///huge.py", DOC * 3000 + "\ndef ")  # about 2.6 MB
    got = await complete(client, "file:///huge.py", DOC.count("\n") * 3000 + 1, 4)
    last = client.stats[-1]  # the model ran on the huge document (its answer may be held back as junk)
    assert last.uri == "file:///huge.py" and last.tokens > 0 and (got.items or last.outcome == "filtered")
    configure(client, method="medusa-typo")
    await wait_for(lambda: any("medusa-typo" in m.message for m in client.messages), "the error message")
    server = client._server  # raw messages the client library would refuse to send:
    for body in (
        b'{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"x": "\xff\xfe"}}',  # not UTF-8
        b'{"jsonrpc": "2.0", "id": "neg", "method": "textDocument/completion", "params": '
        b'{"textDocument": {"uri": "file:///small.py"}, "position": {"line": -1, "character": 0}}}',
        b'{"jsonrpc": "2.0", "id": "junk", "method": "textDocument/completion", "params": [1, 2]}',
        b"{not json",
    ):
        server.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    await server.stdin.drain()
    n = len(client.stats)
    await complete(client, "file:///small.py", 1, 0)
    assert client.stats[n:] and client.stats[-1].uri == "file:///small.py"  # answered by the model
    assert client.stats[-1].source == "model" and client.stats[-1].tokens > 0


async def test_a_request_for_another_document_waits_its_turn(client: LanguageClient):
    old = await _start_long(client, "file:///turn-a.py", "turn-1")
    open_doc(client, "file:///turn-b.py", DOC)
    configure(client, stop="line", max_new_tokens=16, cache=False, method=None)
    other = asyncio.ensure_future(complete(client, "file:///turn-b.py", DEF_LINE, 4))
    await asyncio.sleep(0.2)
    client.protocol.notify(t.CANCEL_REQUEST, t.CancelParams(id="turn-1"))
    with pytest.raises(JsonRpcException):
        await old
    assert (await asyncio.wait_for(other, 120)).items  # both requests are served, one after the other
    configure(client, stop="line", max_new_tokens=48, cache=True, method=None)
