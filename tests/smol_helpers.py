"""SmolLM2-135M-Instruct loaded for a test module: the one loader the real-model tests share.

The README's test command fetches the model first, so a missing model is an error, not a skip.
"""

from __future__ import annotations


def smol_engine(draft: bool = True):
    """The engine on SmolLM2 in fp32 (calibrated), with its trained heads and, if ``draft``, its draft."""
    from specdec.catalog.resolve import resolve
    from specdec.engine.load import load_engine

    choice = resolve("smollm2-135m")
    engine = load_engine(choice.target, choice.draft if draft else None, "cpu", "float32", "auto", heads=choice.heads)
    engine.source = choice
    return engine
