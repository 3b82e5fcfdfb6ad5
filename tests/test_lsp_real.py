"""End to end on a real model: `specdec lsp --model qwen2.5-coder-0.5b` driven over stdio by
pytest-lsp's real client (Neovim's capabilities), fill-in-the-middle included: the completion inside
`colours = [|]` is what the assert on the next line asks for. The model is fetched by the README's
test command (specdec models fetch ... qwen2.5-coder-0.5b)."""

from __future__ import annotations

import sys

import pytest
import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

DOC = "def primaries():\n    colours = []\n    assert colours == ['red', 'green', 'blue']\n    return colours\n"
SERVER = [sys.executable, "-m", "specdec", "lsp", "--model", "qwen2.5-coder-0.5b", "--method", "lookup"]


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(
        t.InitializeParams(
            capabilities=pytest_lsp.client_capabilities("neovim"), initialization_options={"wait_for_model": True}
        )
    )
    yield
    await lsp_client.shutdown_session()


async def test_a_completion_on_qwen_fills_the_middle(client: LanguageClient):
    uri = "file:///colours.py"
    client.text_document_did_open(t.DidOpenTextDocumentParams(t.TextDocumentItem(uri, "python", 1, DOC)))
    col = len("    colours = [")
    got = await client.text_document_completion_async(
        t.CompletionParams(t.TextDocumentIdentifier(uri), t.Position(1, col))
    )
    texts = [i.insert_text for i in got.items]
    assert texts and texts[0].startswith("'red', 'green', 'blue'"), texts
    item = got.items[0]
    if "]" in texts[0]:  # type-over: the item's edit replaces the auto-paired "]" (docs/lsp.md), never doubles it
        assert item.text_edit.range.end.character == col + 1 and item.text_edit.new_text.count("]") == 1
