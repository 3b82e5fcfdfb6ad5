"""What the engine actually loaded, for the About panel: every draft and head's shape, cost and
agreement, and the target's weight format and forward path, read from the loaded objects.

Why: the panel used to read shapes from the training cards, whose keys differ between the tiny
model's and SmolLM2's, so SmolLM2's draft read "? layers, width ? (0.00x FLOPs), agrees 0%"; and it
said "dequantized to fp32" while the target ran on 4-bit blocks (issue 52, item 3).

Contract:
- ``parts(engine) -> [Part]``: one per loaded draft model and head set, in the page's order
  (draft, Medusa, EAGLE). Layers and width from the loaded module (its config; for heads the
  number of heads or decoder layers and the target's width), parameters counted on the loaded
  module, ``flops``: its multiply-adds per drafted token (per step for Medusa, whose heads all run
  at once) over one target forward's per token (``macs``: attention and MLP projections plus the
  LM-head rows read, a draft vocabulary's rows where it has one; multiply-adds, not time: a
  full-precision draft beside a 4-bit target costs more time than its FLOPs say, which the
  measured c shows), and ``agreement``: what its training card measured on held-out text (the
  only place agreement is known before a run; the run's own acceptance is the Generate view's).
- ``macs(config, vocab)``: multiply-adds per token of a Llama-style decoder from its config.
- ``weights_line(engine)``: the target's weight format and forward path from ``engine.forward``
  (``specdec/models/forward.py``), and on the native loops the kernels' integer path
  (``kernels.path()``), in words.
- ``parts_md(engine)``: the table and that line as Markdown; "" without an engine (a remote server)
  or without a transformers model to read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT_WORDS = {
    "fp32": "32-bit floats (fp32)",
    "bf16": "bfloat16",
    "int8": "8-bit integers per output channel (int8)",
    "int4": "4-bit groups of 32 (int4; LM head int8)",
    "q4_1": "4-bit blocks of 32 with a scale and a minimum (Q4_1, as the GGUF ships; LM head Q8_0)",
}
PATH_WORDS = {"hf": "transformers' decoder", "lean": "the engine's fused layers (lean path)"}


@dataclass(frozen=True)
class Part:
    label: str
    layers: str
    width: int | None
    parameters: int | None
    flops: float | None
    agreement: str


def macs(cfg: Any, vocab: int | None = None) -> int:
    h, layers = cfg.hidden_size, cfg.num_hidden_layers
    heads = getattr(cfg, "num_attention_heads", 1) or 1
    hd = getattr(cfg, "head_dim", None) or h // heads
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    ffn = getattr(cfg, "intermediate_size", 4 * h)
    per_layer = h * heads * hd * 2 + h * kv * hd * 2 + 3 * h * ffn
    return layers * per_layer + (vocab or cfg.vocab_size) * h


def _count(module: Any) -> int | None:
    try:
        return sum(p.numel() for p in module.parameters())
    except AttributeError:
        return None


def _card(folder: Path | None) -> dict[str, Any]:
    try:
        return json.loads((Path(folder) / "card.json").read_text(encoding="utf-8")) if folder else {}
    except (OSError, ValueError):
        return {}


def _rows(prop: Any, cfg: Any) -> int:
    """The LM-head rows a proposer reads per token: its draft vocabulary where it has one (Medusa's
    ``vocab_ids``, EAGLE's ``sub`` head), else its whole vocabulary."""
    for ids in (getattr(prop, "vocab_ids", None), getattr(getattr(prop, "sub", None), "ids", None)):
        if ids is not None:
            return len(ids)
    vocab = getattr(prop, "vocab", None)
    return vocab if isinstance(vocab, int) and vocab > 0 else cfg.vocab_size


def _list(values: list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def _draft(prop: Any, target_cfg: Any, target_macs: int) -> Part:
    cfg = prop.model.config
    card = _card(Path(str(getattr(cfg, "name_or_path", "") or "")))
    agree = card.get("greedy_agreement", card.get("validation_greedy_agreement"))
    where = "held-out" if "greedy_agreement" in card else "validation"
    text = f"its greedy token is the target's {agree:.0%} of the time ({where} text, its card)" if agree else "-"
    flops = macs(cfg, _rows(prop, cfg)) / target_macs
    return Part("draft model (q)", str(cfg.num_hidden_layers), cfg.hidden_size, _count(prop.model), flops, text)


def _medusa(prop: Any, target_cfg: Any, target_macs: int, card: dict[str, Any]) -> Part:
    own = _count(prop.heads) or 0
    n = len(getattr(prop.heads, "block", ())) or None
    rows = _rows(prop, target_cfg) * target_cfg.hidden_size
    flops = (own + (n or 0) * rows if getattr(prop, "tied", False) else own) / target_macs
    top1 = card.get("heldout_top1_per_head") or card.get("validation_top1_per_head")
    text = f"top-1 agreement per head (k+1 tokens ahead): {_list(top1)} (its card)" if top1 else "-"
    return Part("Medusa heads", f"{n} heads, one block each", target_cfg.hidden_size, own, flops, text)


def _eagle(prop: Any, target_cfg: Any, target_macs: int, card: dict[str, Any]) -> Part:
    own = _count(prop.layer) or 0
    rows = _rows(prop, target_cfg) * target_cfg.hidden_size
    flops = (own + rows) / target_macs
    top1 = card.get("heldout_top1_per_depth") or card.get("validation_top1_per_depth")
    text = f"top-1 agreement per depth: {_list(top1)} (its card)" if top1 else "-"
    return Part("EAGLE head", "1 decoder layer", target_cfg.hidden_size, own, flops, text)


def parts(engine: Any) -> list[Part]:
    target_cfg = engine.target.model.config
    target_macs = macs(target_cfg)
    props, heads = getattr(engine, "proposers", {}), getattr(engine, "heads_dir", None)
    out = []
    if "draft" in props:
        out.append(_draft(props["draft"], target_cfg, target_macs))
    if "medusa" in props:
        out.append(_medusa(props["medusa"], target_cfg, target_macs, _card(heads and Path(heads) / "medusa")))
    if "eagle" in props:
        out.append(_eagle(props["eagle"], target_cfg, target_macs, _card(heads and Path(heads) / "eagle")))
    return out


def weights_line(engine: Any) -> str:
    fwd = getattr(engine, "forward", None)
    if fwd is None:
        return ""
    fmt = FORMAT_WORDS.get(fwd.weights, fwd.weights)
    path = PATH_WORDS.get(fwd.path, fwd.path)
    if fwd.rows == "native":
        from specdec.kernels import path as kernels_path

        rows = (
            f"; every forward on the native row-exact loops, integer path `{kernels_path()}` for this CPU "
            "(the same bits on every CPU: docs/memwall.md, 'Every CPU')"
        )
    else:
        rows = f"; the verifier's rows and one-token steps on the row-exact {fwd.rows} forward" if fwd.rows else ""
    return f"**Target weights running now:** {fmt}, computed by {path}{rows} (chosen at start-up by calibration)."


def _millions(n: int | None) -> str:
    return "?" if n is None else f"{n / 1e6:.1f} M"


def parts_md(engine: Any) -> str:
    if getattr(getattr(getattr(engine, "target", None), "model", None), "config", None) is None:
        return ""  # no engine here (a remote server), or a stand-in without a model
    rows = "".join(
        f"| {p.label} | {p.layers} | {p.width or '?'} | {_millions(p.parameters)} | "
        f"{'?' if p.flops is None else f'{p.flops:.3f}x'} | {p.agreement} |\n"
        for p in parts(engine)
    )
    table = (
        "| loaded | layers | width | parameters | FLOPs per drafted token / target's | agreement |\n"
        "|---|---|---|---|---|---|\n" + rows
        if rows
        else ""
    )
    return f"{weights_line(engine)}\n\n{table}"
