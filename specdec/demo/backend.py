"""The demo's line about its backend: where tokens are decoded and what that backend cannot show.

Contract: ``backend_note(backend) -> str`` (Markdown). For the embedded engine it says every fate
is shown; for a backend whose ``capabilities`` lack fates or trees (``specdec/serving/remote.py`` on vLLM)
it names the server and lists what is missing, so an empty part of the page is explained rather
than mistaken for a bug: vLLM never exposes rejected draft tokens or p/q, and verifies chains only.
"""

from __future__ import annotations


def backend_note(backend) -> str:
    caps = backend.capabilities
    describe = getattr(backend, "describe", None)
    where = describe().split(":")[0] if describe else "the embedded engine"
    if caps.fates and caps.trees:
        return f"**Backend:** {where}: every token's fate (accepted, rejected, recovered, bonus) and p / q are shown."
    missing = []
    if not caps.fates:
        missing.append("rejected draft tokens and every p / q (the transcript shows no rejected tokens)")
    if not caps.trees:
        missing.append("token trees (Medusa and EAGLE run as top-1 chains there)")
    if not caps.corpus:
        missing.append("extra lookup sources")
    return f"**Backend:** {where}. This backend cannot show: " + "; ".join(missing) + "."
