"""Fill-in-the-middle prompts: the text after the cursor goes into the prompt too, where the model
was trained for it (Qwen2.5-Coder, StarCoder-style tokens), as llama.cpp's ``/infill`` and llm-ls do.

Contract: ``fim_tokens(token_to_id)`` returns the (prefix, suffix, middle) token ids when the
vocabulary has one of the known sets, else None (the model completes from the prefix alone).
``layout(pre, suf, fim, window)`` lays out ``<prefix> pre <suffix> suf <middle>`` in at most
``window`` ids: the suffix keeps at most a quarter of the window (the lines right after the cursor
matter most; ``suf`` is cut at its end), the prefix the rest (cut at its start). The model then
writes the middle; the completion is that text, stopped as without FIM.
"""

from __future__ import annotations

from collections.abc import Callable

SETS = (
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),  # Qwen2.5-Coder
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),  # StarCoder, SantaCoder
)
SUFFIX_CHARS = 4_000  # text after the cursor that may enter the prompt


def fim_tokens(token_to_id: Callable[[str], int | None]) -> tuple[int, int, int] | None:
    for names in SETS:
        ids = [token_to_id(n) for n in names]
        if all(isinstance(i, int) and i >= 0 for i in ids):
            return ids[0], ids[1], ids[2]
    return None


def layout(pre: list[int], suf: list[int], fim: tuple[int, int, int], window: int) -> tuple[list[int], int]:
    """(the prompt ids, how many ``pre`` ids were dropped at the start)."""
    budget = window - 3
    suf = suf[: max(0, budget // 4)]
    keep = max(1, budget - len(suf))
    drop = max(0, len(pre) - keep)
    p, s, m = fim
    return [p, *pre[drop:], s, *suf, m], drop
