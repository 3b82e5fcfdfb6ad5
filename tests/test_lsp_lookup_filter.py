"""Lookup's copies pass the same confidence filter as the model's own suggestions (issue 53, item 4):
a completion that prompt lookup copied from elsewhere in the file or from another open document
carries the target's probability of every emitted token, so ``specdec.lsp.quiet.unsure`` judges it
on the same figure as ``none``'s identical text, and holds it back at the same threshold."""

from __future__ import annotations

import asyncio

from specdec.lsp.completer import Completer
from specdec.lsp.completion import Options
from specdec.lsp.quiet import confidence, unsure

OTHER = 'import re\n\n\ndef squash(text):\n    return re.sub(r"\\s+", " ", text.strip()).lower()\n'
DOC = (
    'import re\n\n\ndef tidy(line):\n    """Collapse blanks."""\n'
    '    return re.sub(r"\\s+", " ", line.strip()).lower()\n\n\ndef clean(text):\n    return re.sub('
)


def test_a_lookup_copy_is_scored_and_filtered_as_the_same_text_from_none(backend):
    completer = Completer(backend)
    others = [("file:///other.py", 1, OTHER)]

    async def run(method: str):
        opts = Options(method=method, max_new_tokens=24, stop="line", cache=False, min_confidence=0)
        job = completer.prepare(DOC, "", others, opts)
        return await completer.run(job, lambda: False)

    none, lookup = asyncio.run(run("none")), asyncio.run(run("lookup"))
    assert lookup.text == none.text and lookup.text.strip()  # exact: the same text either way
    assert lookup.stats.steps < none.stats.steps  # lookup copied (tiny: 8 steps against 24, 2026-12-07)
    covered = sorted((s, n) for s, n, _ in lookup.spans if n > 0)
    assert sum(n for _, n in covered) == len(lookup.text)  # every character of the copy carries a logp
    c_none, c_lookup = confidence(none.spans, len(none.text)), confidence(lookup.spans, len(lookup.text))
    assert c_lookup is not None and abs(c_lookup - c_none) < 1e-3
    above = min(0.99, c_lookup + 0.01)
    assert unsure(lookup.text, lookup.spans, above) and unsure(none.text, none.spans, above)
    assert not unsure(lookup.text, lookup.spans, max(0.0, c_lookup - 0.01))
