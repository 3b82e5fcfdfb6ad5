"""Strict tensor maps from this project's model and head folders to vLLM's parameter names.

Contract: ``plan(kind, config)`` -> ``(params, rules)`` for kind ``llama`` (a target or draft
model folder, HF Llama names), ``medusa`` (vLLM's ``Medusa`` class with ``medusa_fc_bias``) or
``eagle`` (the plugin's ``EagleSpecdecLlamaForCausalLM``: vLLM's EAGLE layer plus the fc bias and
input layernorm ours have). ``params`` is every parameter the vLLM class holds ({name: shape});
``rules`` says how each is built from source tensors. ``convert(kind, config, tensors)`` applies
them and raises ``ExportError`` unless every source tensor is used, every rule finds its sources,
and the result fills exactly ``params`` with the right shapes. Why so strict: vLLM's loaders skip
unknown names silently (a Medusa export without ``medusa_fc_bias`` simply loses its biases) and
leave unfilled parameters at their initial values, so a wrong map runs and only accepts less.
No vLLM import here (vLLM lives in its own venv); torch only on tensors handed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class ExportError(ValueError):
    """A folder that does not map one-to-one onto vLLM's parameters; the message says which."""


@dataclass(frozen=True)
class Rule:
    dest: str
    sources: tuple[str, ...]
    build: Callable[[list[Any]], Any] = lambda ts: ts[0]


def _same(name: str) -> Rule:
    return Rule(name, (name,))


def _llama(cfg: dict) -> tuple[dict, list[Rule]]:
    h, v, f, n = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    hd = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg.get("num_key_value_heads", cfg["num_attention_heads"]) * hd
    params = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    if not cfg.get("tie_word_embeddings", False):
        params["lm_head.weight"] = (v, h)
    for i in range(n):
        p = f"model.layers.{i}."
        params.update(
            {
                p + "input_layernorm.weight": (h,),
                p + "post_attention_layernorm.weight": (h,),
                p + "self_attn.q_proj.weight": (q, h),
                p + "self_attn.k_proj.weight": (kv, h),
                p + "self_attn.v_proj.weight": (kv, h),
                p + "self_attn.o_proj.weight": (h, q),
                p + "mlp.gate_proj.weight": (f, h),
                p + "mlp.up_proj.weight": (f, h),
                p + "mlp.down_proj.weight": (h, f),
            }
        )
    return params, [_same(name) for name in params]


def _medusa(cfg: dict) -> tuple[dict, list[Rule]]:
    h, v = cfg["hidden"], cfg["vocab"]
    params, rules = {}, []
    for i in range(cfg["n_heads"]):
        for part, shape in (("weight", (h, h)), ("bias", (h,))):
            params[f"blocks.{i}.layers.0.{part}"] = shape
            rules.append(Rule(f"blocks.{i}.layers.0.{part}", (f"block.{i}.{part}",)))
        params[f"lm_heads.{i}.weight"] = (v, h)
        rules.append(Rule(f"lm_heads.{i}.weight", (f"proj.{i}.weight",)))
    return params, rules


def _eagle(cfg: dict) -> tuple[dict, list[Rule]]:
    h, f = cfg["hidden"], cfg["ffn"]
    p = "layers.0."
    params = {
        "fc.weight": (h, 2 * h),
        "fc.bias": (h,),
        p + "input_layernorm.weight": (h,),
        p + "self_attn.q_proj.weight": (h, h),
        p + "self_attn.k_proj.weight": (h, h),
        p + "self_attn.v_proj.weight": (h, h),
        p + "self_attn.o_proj.weight": (h, h),
        p + "post_attention_layernorm.weight": (h,),
        p + "mlp.gate_proj.weight": (f, h),
        p + "mlp.up_proj.weight": (f, h),
        p + "mlp.down_proj.weight": (h, f),
    }

    def fc_swapped(ts):  # ours: fc(cat(feature, embedding)); vLLM's: fc(cat(embedding, feature))
        return ts[0].roll(h, dims=1).contiguous()

    def part(i: int, n: int):
        return lambda ts: ts[0].chunk(n, dim=0)[i].contiguous() if ts[0].shape[0] % n == 0 else ts[0]

    rules = [
        Rule("fc.weight", ("fc.weight",), fc_swapped),
        Rule("fc.bias", ("fc.bias",)),
        Rule(p + "input_layernorm.weight", ("ln1",)),
        Rule(p + "self_attn.q_proj.weight", ("qkv.weight",), part(0, 3)),
        Rule(p + "self_attn.k_proj.weight", ("qkv.weight",), part(1, 3)),
        Rule(p + "self_attn.v_proj.weight", ("qkv.weight",), part(2, 3)),
        Rule(p + "self_attn.o_proj.weight", ("o.weight",)),
        Rule(p + "post_attention_layernorm.weight", ("ln2",)),
        Rule(p + "mlp.gate_proj.weight", ("gate_up.weight",), part(0, 2)),
        Rule(p + "mlp.up_proj.weight", ("gate_up.weight",), part(1, 2)),
        Rule(p + "mlp.down_proj.weight", ("down.weight",)),
    ]
    return params, rules


PLANS = {"llama": _llama, "medusa": _medusa, "eagle": _eagle}


def plan(kind: str, config: dict) -> tuple[dict[str, tuple[int, ...]], list[Rule]]:
    if kind not in PLANS:
        raise ExportError(f"no vLLM map for kind {kind!r}; known: {', '.join(PLANS)}")
    try:
        return PLANS[kind](config)
    except KeyError as e:
        raise ExportError(f"{kind} config.json lacks {e.args[0]!r}") from None


def convert(kind: str, config: dict, tensors: dict[str, Any], where: str = "") -> dict[str, Any]:
    """vLLM-named tensors from ``tensors``, or ExportError naming every mismatch."""
    params, rules = plan(kind, config)
    label = f"{kind} {where}".strip()
    needed = {s for r in rules for s in r.sources}
    missing, unexpected = sorted(needed - tensors.keys()), sorted(tensors.keys() - needed)
    if missing:
        raise ExportError(f"{label}: missing tensor(s) {', '.join(missing)} (the vLLM class needs them)")
    if unexpected:
        raise ExportError(
            f"{label}: unexpected tensor(s) {', '.join(unexpected)}: no vLLM parameter takes them "
            f"(vLLM would drop them silently)"
        )
    out = {r.dest: r.build([tensors[s] for s in r.sources]) for r in rules}
    unfilled, extra = sorted(params.keys() - out.keys()), sorted(out.keys() - params.keys())
    if unfilled or extra:
        raise ExportError(f"{label}: vLLM parameters left unfilled {unfilled}, or not in the class {extra}")
    bad = [f"{n} {tuple(out[n].shape)} != {shape}" for n, shape in params.items() if tuple(out[n].shape) != shape]
    if bad:
        raise ExportError(f"{label}: wrong shape(s): {'; '.join(bad)}")
    return out
