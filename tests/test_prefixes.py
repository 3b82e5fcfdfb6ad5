"""Prefixes kept warm (specdec/models/prefixes.py): switching between two documents prefills only what
changed, and the output is exactly a fresh engine's."""

from __future__ import annotations

from specdec.core.config import GenerateSpec
from specdec.models import prefixes


def test_switching_documents_reuses_each_ones_prefix_and_changes_no_token(engine, prompts):
    a, b = prompts[0], prompts[1]
    spec = GenerateSpec(method="none", max_new_tokens=6)
    fed: list[int] = []
    forward = engine.target._forward

    def counting(ids, positions, mask, *more, **kw):
        fed.append(len(ids))
        return forward(ids, positions, mask, *more, **kw)

    prefixes.forget(engine.target)
    want = {p: engine.generate(p + "\n", spec).tokens for p in (a, b)}  # also warms both
    engine.target._forward = counting
    try:
        for p in (a, b, a, b):
            fed.clear()
            got = engine.generate(p + "\n", spec).tokens
            assert got == want[p]
            assert fed[0] < 16, fed  # the prefill of a switched-to document: only the last tokens
    finally:
        engine.target._forward = forward
        prefixes.forget(engine.target)


def _mine(target, ids) -> list[list[int]]:
    from specdec.core.seq import common_prefix

    return [s for s in prefixes.kept(target) if 2 * common_prefix(s, ids) >= len(s)]


def test_drop_removes_a_closed_documents_state_and_only_its(engine, prompts):
    spec = GenerateSpec(method="none", max_new_tokens=4)
    a, b, c = (engine.encode(p + "\n") for p in prompts[:3])
    prefixes.forget(engine.target)
    try:
        for ids in (a, b, c):  # a and b are put aside in turn
            engine.generate(ids, spec)
        assert _mine(engine.target, a) and _mine(engine.target, b)
        assert prefixes.drop(engine.target, a) == 1
        assert not _mine(engine.target, a) and _mine(engine.target, b)
        assert prefixes.drop(engine.target, a) == 0
    finally:
        prefixes.forget(engine.target)


def test_closing_a_document_in_the_server_drops_its_prefix_state(engine, backend, prompts):
    """lsp.Completer.forget (didClose) -> LocalBackend.drop_prefix -> prefixes.drop, on the model
    thread; the closed document's next request prefills its whole window again."""
    import asyncio

    from specdec.lsp.completer import Completer
    from specdec.lsp.completion import Options

    completer = Completer(backend)
    opts = Options(method="none", max_new_tokens=4, stop="line", heal=False)
    docs = {f"file:///{i}.py": prompts[i] + "\n" for i in range(3)}

    async def complete(uri: str):
        job = completer.prepare(docs[uri], "", [], opts)
        await completer.run(job, lambda: False, key=uri)
        return job.ids

    async def main():
        ids = {uri: await complete(uri) for uri in docs}  # the first two are put aside
        first = next(iter(docs))
        assert _mine(engine.target, ids[first])
        completer.forget(first)
        await complete(list(docs)[1])  # a request after the close: the drop ran before it
        assert not _mine(engine.target, ids[first])
        assert _mine(engine.target, ids[list(docs)[2]])  # the others stay

    prefixes.forget(engine.target)
    try:
        asyncio.run(main())
    finally:
        prefixes.forget(engine.target)
