"""``specdec lsp --max-batch 2`` over stdio (pytest-lsp's real client): two documents completed at
once (two requests in flight on the batching backend) each get the engine's healed greedy
continuation (the batching backend heals as the single-request one does)."""

from __future__ import annotations

import asyncio
import sys

import pytest
import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.test_lsp_server import DEF_LINE, LINES, complete, configure, expected, open_doc

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=[sys.executable, "-m", "specdec", "lsp", "--max-batch", "2"]),
)
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(
        t.InitializeParams(
            capabilities=pytest_lsp.client_capabilities("neovim"), initialization_options={"wait_for_model": True}
        )
    )
    yield
    await lsp_client.shutdown_session()


async def test_two_documents_at_once_each_get_their_greedy_continuation(client: LanguageClient, engine):
    configure(client, method="lookup", stop="line", cache=False, max_new_tokens=16)
    cols = (len("def comp"), len("def compr"))
    uris = ("file:///one.py", "file:///two.py")
    for uri in uris:
        open_doc(client, uri, "\n".join(LINES))
    prefix = "\n".join(LINES[:DEF_LINE]) + "\n"
    # mid-word ("def compr"): the batching backend heals (Capabilities.heal), as the local one does
    want = [expected(engine, prefix + LINES[DEF_LINE][:c], "line", 16) for c in cols]
    got = await asyncio.gather(*(complete(client, u, DEF_LINE, c) for u, c in zip(uris, cols)))
    assert [[i.insert_text for i in g.items] for g in got] == [[w] for w in want]
