"""How many KV slots of what size: the memory bound of the batch.

Contract: ``plan_slots(model, context, max_batch, kv_tokens) -> (slots, capacity)``. A slot holds
one request's whole context (``capacity = context + 1`` positions, the +1 so a scoring forward at
the edge of the context still writes inside its slot). ``kv_tokens`` is the total the cache may
hold; the number of slots is ``min(max_batch, kv_tokens // capacity)`` and a ``ValueError`` says
so when not even one slot fits. ``kv_tokens = None`` picks ``max_batch * capacity`` but at most
what a quarter of the available memory holds (``default_kv_tokens``). ``bytes_per_token`` is the
target's KV (``kv_bytes_per_token``: what a decoding step reads per cached position of a row) plus
the kept hidden state for one position.
"""

from __future__ import annotations

import os


def kv_bytes_per_token(model) -> int:
    cfg = model.config
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return 2 * cfg.num_hidden_layers * heads * head_dim * next(model.parameters()).element_size()


def bytes_per_token(model) -> int:
    return kv_bytes_per_token(model) + model.config.hidden_size * next(model.parameters()).element_size()


def available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def default_kv_tokens(model, context: int, max_batch: int) -> int:
    want = max_batch * (context + 1)
    avail = available_bytes()
    if avail is None:
        return want
    return max(context + 1, min(want, avail // 4 // bytes_per_token(model)))


def plan_slots(model, context: int, max_batch: int, kv_tokens: int | None) -> tuple[int, int]:
    capacity = context + 1
    total = default_kv_tokens(model, context, max_batch) if kv_tokens is None else int(kv_tokens)
    slots = min(max_batch, total // capacity)
    if slots < 1:
        raise ValueError(f"--kv-tokens {total} holds no request: one slot needs {capacity} tokens (the context + 1)")
    return slots, capacity
