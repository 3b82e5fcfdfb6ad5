"""Architectures of the shipped models (Llama), and their HF export.

Contract: ``TARGET`` and ``DRAFT`` are the shapes the project trains; the draft's per-token compute
(non-embedding parameters plus the LM head) is at most 1/8 of the target's. ``export(...)`` writes
an HF folder (fp16 safetensors, config, tokenizer) that ``AutoModelForCausalLM`` loads.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

CONTEXT = 512


def llama_config(vocab_size: int, hidden: int, layers: int, heads: int, ffn: int, eos_id: int) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=ffn,
        max_position_embeddings=CONTEXT,
        tie_word_embeddings=True,
        rope_theta=10000.0,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
    )


TARGET = dict(hidden=320, layers=6, heads=5, ffn=864)
DRAFT = dict(hidden=128, layers=2, heads=2, ffn=352)


def per_token_flops(cfg: LlamaConfig) -> int:
    """2 x (matmul parameters touched per token): attention/MLP projections plus the LM head."""
    d, f = cfg.hidden_size, cfg.intermediate_size
    per_layer = 4 * d * d + 3 * d * f
    return 2 * (cfg.num_hidden_layers * per_layer + d * cfg.vocab_size)


def build(vocab_size: int, eos_id: int, shape: dict, seed: int) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    return LlamaForCausalLM(llama_config(vocab_size, eos_id=eos_id, **shape))


def export(model: LlamaForCausalLM, tokenizer, out: Path) -> None:
    """Save ``model`` in fp16 safetensors with the tokenizer; files made world-readable."""
    out.mkdir(parents=True, exist_ok=True)
    half = LlamaForCausalLM(model.config)
    half.load_state_dict(model.state_dict())
    half = half.to(torch.float16)
    half.generation_config.pad_token_id = model.config.eos_token_id
    half.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    for p in out.iterdir():
        os.chmod(p, 0o644)
