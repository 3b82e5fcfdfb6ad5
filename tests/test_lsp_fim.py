"""Fill-in-the-middle on a model that has it (Qwen2.5-Coder-0.5B, fetched by the README's test
command): the prompt layout with its real tokenizer, and a completion through the language
server's completer and the real engine."""

from __future__ import annotations

import asyncio

import pytest

from specdec.lsp.fim import fim_tokens, layout


def test_layout_keeps_the_suffix_short_and_drops_the_prefix_start():
    fim = (1, 2, 3)
    ids, drop = layout(list(range(10, 110)), list(range(200, 260)), fim, window=43)
    assert ids[0] == 1 and ids[-1] == 3 and len(ids) <= 43
    s = ids.index(2)
    assert ids[1:s] == list(range(10 + drop, 110)) and drop == 100 - (40 - 10)  # the prefix's end is kept
    assert ids[s + 1 : -1] == list(range(200, 210))  # a quarter of the window, the suffix's start
    assert fim_tokens({"<fim_prefix>": 5, "<fim_suffix>": 6, "<fim_middle>": 7}.get) == (5, 6, 7)
    assert fim_tokens({"<|fim_prefix|>": 5}.get) is None


@pytest.fixture(scope="module")
def qwen_backend():
    from specdec.catalog.resolve import resolve
    from specdec.engine.load import load_engine
    from specdec.serving.local import LocalBackend

    choice = resolve("qwen2.5-coder-0.5b")
    backend = LocalBackend(load_engine(choice.target, None, "cpu", "bfloat16", "auto"))
    yield backend
    backend.shutdown(10)


@pytest.mark.slow
def test_a_fim_completion_on_qwen_sees_the_text_after_the_cursor(qwen_backend):
    from specdec.lsp.completer import Completer
    from specdec.lsp.completion import Options

    completer = Completer(qwen_backend)
    fim = completer.fim()
    assert fim is not None and len(set(fim)) == 3
    before = "def primaries():\n    colours = ["
    after = "]\n    assert colours == ['red', 'green', 'blue']\n    return colours\n"
    opts = Options(method="lookup", max_new_tokens=12, stop="line")
    job = completer.prepare(before, after, [], opts)
    assert job.ids[0] == fim[0] and job.ids[-1] == fim[2] and fim[1] in job.ids
    suffix = job.ids[job.ids.index(fim[1]) + 1 : -1]
    assert qwen_backend.engine.tokenizer.decode(suffix) == after
    plain = completer.prepare(before, after, [], Options(method="lookup", max_new_tokens=12, stop="line", fim=False))
    assert fim[0] not in plain.ids
    out = asyncio.run(completer.run(job, lambda: False, key="u"))
    assert out.text.startswith("'red', 'green', 'blue'"), out.text  # the middle the suffix asks for
