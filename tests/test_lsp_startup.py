"""Start fast, say so (specdec/lsp/startup.py), through pytest-lsp's real client and a real
`specdec lsp` process with the default settings: ``initialize`` is answered before the model has
loaded, the load shows as work-done progress (begin, reports, end), a completion asked meanwhile
gets an empty answer at once, and one asked after the end gets the model's; a model that fails to
load is named in ``window/showMessage`` and the server keeps answering (empty).

Figures: the time from the process's start to ``initialize``'s answer is printed (-s shows it);
it is not asserted (the machine is shared), only the order of events is.
"""

from __future__ import annotations

import asyncio
import sys
import time

import pytest
import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="function")]

DOC = "import os\n\n\ndef read_lines(path):\n    with open(path) as f:\n        return f.read().splitlines()\n\n\ndef "
URI = "file:///startup.py"


class Clock:
    """When each kind of event reached the client (seconds since the process was started)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.at: dict[str, float] = {}

    def mark(self, what: str) -> None:
        self.at.setdefault(what, time.perf_counter() - self.t0)


def progress(client: LanguageClient) -> list:
    """The one loading progress's values (begin, reports, end)."""
    tokens = [v for v in client.progress_reports.values() if v and getattr(v[0], "title", "").startswith("specdec")]
    assert len(tokens) == 1, client.progress_reports
    return tokens[0]


async def ended(client: LanguageClient, timeout: float = 300.0) -> t.WorkDoneProgressEnd:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        values = [v for vs in client.progress_reports.values() for v in vs]
        end = next((v for v in values if isinstance(v, t.WorkDoneProgressEnd)), None)
        if end is not None:
            return end
        await asyncio.sleep(0.05)
    raise AssertionError(f"no progress end in {timeout} s: {client.progress_reports}")


def complete(client: LanguageClient):
    line = DOC.count("\n")
    return client.text_document_completion_async(
        t.CompletionParams(t.TextDocumentIdentifier(URI), t.Position(line, len(DOC) - DOC.rfind("\n") - 1))
    )


CLOCK = Clock()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "specdec", "lsp"]))
async def client(lsp_client: LanguageClient):
    CLOCK.__init__()  # the process starts with the fixture
    await lsp_client.initialize_session(
        t.InitializeParams(capabilities=pytest_lsp.client_capabilities("neovim"), initialization_options={})
    )
    CLOCK.mark("initialize")
    yield
    await lsp_client.shutdown_session()


async def test_initialize_answers_before_the_model_loads_and_progress_says_when_it_has(client: LanguageClient):
    print(f"\ninitialize answered {CLOCK.at['initialize']:.2f} s after the server process started")
    values = [v for vs in client.progress_reports.values() for v in vs]
    assert not any(isinstance(v, t.WorkDoneProgressEnd) for v in values)  # not loaded when initialize answered
    client.text_document_did_open(t.DidOpenTextDocumentParams(t.TextDocumentItem(URI, "python", 1, DOC)))
    early = await complete(client)
    CLOCK.mark("early completion")
    end = await ended(client)
    CLOCK.mark("loaded")
    print(f"the model was ready {CLOCK.at['loaded']:.2f} s after start; {CLOCK.at}")
    assert CLOCK.at["initialize"] < CLOCK.at["early completion"] < CLOCK.at["loaded"]
    assert not early.items and early.is_incomplete  # at once, empty; the client asks again on the next key
    values = progress(client)
    assert isinstance(values[0], t.WorkDoneProgressBegin) and values[0].title == "specdec: loading the model"
    reports = [v.message for v in values if isinstance(v, t.WorkDoneProgressReport)]
    assert any("loading tiny" in m for m in reports), reports  # the loader's steps ($SPECDEC_MODEL=tiny here)
    assert values[-1] is end and end.message.startswith("ready: model tiny")
    got = await complete(client)
    assert got.items and got.items[0].insert_text  # the model answers now
    assert not client.messages  # no error shown


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "specdec", "lsp", "--target", "/nonexistent/model"])
)
async def broken(lsp_client: LanguageClient):
    await lsp_client.initialize_session(t.InitializeParams(capabilities=pytest_lsp.client_capabilities("neovim")))
    yield
    await lsp_client.shutdown_session()


async def test_a_model_that_fails_to_load_is_shown_and_the_server_keeps_answering(broken: LanguageClient):
    end = await ended(broken)
    assert end.message == "failed"
    for _ in range(100):
        if broken.messages:
            break
        await asyncio.sleep(0.05)
    assert broken.messages and broken.messages[0].type == t.MessageType.Error
    assert (
        "the model failed to load" in broken.messages[0].message and "/nonexistent/model" in broken.messages[0].message
    )
    broken.text_document_did_open(t.DidOpenTextDocumentParams(t.TextDocumentItem(URI, "python", 1, DOC)))
    got = await complete(broken)
    assert not got.items
