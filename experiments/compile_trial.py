"""The torch.compile trial (issue 14): Inductor's CPU backend with weight freezing against the eager paths.

Why: Inductor with ``freezing`` constant-folds the weights and uses oneDNN packed linears where they
pay, the job ``specdec/models/packed.py`` and ``specdec/models/lean_target.py`` do by hand. This script times, on
the running machine, plain greedy decoding of the target (the step every method pays once) by:
- ``hf_greedy``: transformers' ``generate`` (eager, its dynamic cache): the stock baseline;
- ``hf_compiled``: ``generate`` with a static cache and its forward compiled by Inductor (freezing);
- ``lean``: the engine's ``none`` through the lean target (eager, the shipped path);
- ``lean_compiled``: the same loop with the lean layer stack compiled by Inductor (freezing,
  dynamic shapes: the cache length grows every step).
Every variant must emit the same tokens (checked); prompts are interleaved, figures are medians.
Compile time is reported apart (first prompt of each compiled variant, warm-up excluded).

Usage: ``python -m experiments.compile_trial --limit 6 --max-new-tokens 128 --json out.json``.
Not part of the engine: the trial decides whether a compiled path is worth owning (docs/bench.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from specdec.bench.hf import hf_generate
from specdec.bench.results import write_results
from specdec.bench.run import load_prompts
from specdec.cli.args import DEFAULT_PROMPTS
from specdec.core.config import GenerateSpec
from specdec.engine.session import Engine
from specdec.models.lean import causal_mask


class CompiledStack(torch.nn.Module):
    """The lean target's layers as one module whose weights are buffers (so freezing folds them)."""

    def __init__(self, lean) -> None:
        super().__init__()
        self.meta = [(f.H, f.KV, f.hd, f.eps, f.fold_rope) for f in lean.layers]
        for i, f in enumerate(lean.layers):
            for name in ("qkv", "o", "gate_up", "down"):
                self.register_buffer(f"{name}{i}", getattr(f, name).weight.contiguous())

    def forward(self, x, cos, sin, ks: list, vs: list, start: int, mask):
        for i, (H, KV, hd, eps, fold) in enumerate(self.meta):
            T, D, n = x.shape[0], (H + KV) * hd, (x.shape[-1],)
            end = start + T
            y = F.linear(F.rms_norm(x, n, None, eps), getattr(self, f"qkv{i}"))
            if fold:
                qk, vv = torch.addcmul(y[:, :D] * cos, y[:, D : 2 * D], sin), y[:, 2 * D :]
            else:
                h = y[:, :D].view(T, H + KV, 2, hd // 2)
                qk = torch.addcmul(y[:, :D] * cos, torch.cat([-h[:, :, 1], h[:, :, 0]], -1).view(T, D), sin)
                vv = y[:, D:]
            k, v = ks[i], vs[i]
            k[:, start:end] = qk[:, H * hd :].view(T, KV, hd).transpose(0, 1)
            v[:, start:end] = vv.view(T, KV, hd).transpose(0, 1)
            q = qk[:, : H * hd].view(T, H, hd).transpose(0, 1)
            att = F.scaled_dot_product_attention(q[None], k[None, :, :end], v[None, :, :end], attn_mask=mask)
            x = x + F.linear(att[0].transpose(0, 1).reshape(T, H * hd), getattr(self, f"o{i}"))
            g, u = F.linear(F.rms_norm(x, n, None, eps), getattr(self, f"gate_up{i}")).chunk(2, dim=-1)
            x = x + F.linear(F.silu(g) * u, getattr(self, f"down{i}"))
        return x


def compile_lean(engine: Engine):
    """(on, off): route the lean target's layer loop through one compiled stack, or back."""
    import specdec.models.cache as kv

    lean = engine.target.lean
    stack = torch.compile(CompiledStack(lean).eval(), dynamic=True, options={"freezing": True})
    original = lean.hidden

    @torch.inference_mode()
    def hidden(cache, ids, positions, mask, kind="lean"):
        if mask is not None or kind != "lean":
            return original(cache, ids, positions, mask, kind)
        T, L = ids.shape[0], kv.length(cache)
        lean._table(L + T)
        bufs = kv.reserve(cache, L + T, lean.n_kv, lean.head_dim, lean.embed)
        x = stack(
            lean.embed[ids],
            lean.cos[L : L + T],
            lean.sin[L : L + T],
            [b[0] for b in bufs],
            [b[1] for b in bufs],
            L,
            causal_mask(T, L, ids.device),
        )
        kv.advance(cache, T)
        return F.rms_norm(x, (x.shape[-1],), lean.norm, lean.eps)

    return (lambda: setattr(lean, "hidden", hidden)), (lambda: setattr(lean, "hidden", original))


def runners(engine: Engine, n: int):
    from transformers import CompileConfig

    cc = CompileConfig(dynamic=False, mode=None, options={"freezing": True})
    cc._compile_all_devices = True
    generate = hf_generate(engine)

    def hf(ids, **kw):
        return generate(ids, n, **kw)

    spec = GenerateSpec(method="none", max_new_tokens=n)

    def ours(ids):
        return engine.generate(ids, spec).tokens

    return {
        "hf_greedy": hf,
        "hf_compiled": lambda ids: hf(ids, cache_implementation="static", max_cache_len=512, compile_config=cc),
        "lean": ours,
        "lean_compiled": ours,
    }


def ratios(med: dict) -> dict:
    """Each compiled variant over its eager one, and the lean loop over transformers' greedy."""
    return {
        "lean_compiled_vs_lean": med["lean_compiled"] / med["lean"],
        "hf_compiled_vs_hf_greedy": med["hf_compiled"] / med["hf_greedy"],
        "lean_vs_hf_greedy": med["lean"] / med["hf_greedy"],
        "lean_compiled_vs_hf_compiled": med["lean_compiled"] / med["hf_compiled"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    torch.set_flush_denormal(True)
    engine = Engine.load(calibration="auto")
    engine.target.use("lean")
    prompts = [engine.encode(p) for p in load_prompts(DEFAULT_PROMPTS, a.limit)]
    run = runners(engine, a.max_new_tokens)
    on, off = compile_lean(engine)
    first: dict[str, float] = {}
    rows: dict[str, list[float]] = {k: [] for k in run}
    tokens: dict[str, list] = {k: [] for k in run}
    warm = engine.encode("def warm_up(x):\n    return")
    for i, ids in enumerate([warm, *prompts]):  # the first pass compiles; it is timed apart
        for name, fn in run.items():
            (on if name == "lean_compiled" else off)()
            t = time.perf_counter()
            out = fn(ids)
            dt = time.perf_counter() - t
            if i == 0:
                first[name] = dt
                continue
            rows[name].append(len(out) / dt)
            tokens[name].append(out)
    off()
    same = {k: sum(a == b for a, b in zip(v, tokens["hf_greedy"])) for k, v in tokens.items()}
    res = {
        "prompts": len(prompts),
        "max_new_tokens": a.max_new_tokens,
        "threads": torch.get_num_threads(),
        "first_call_s": first,
        "median_tok_s": {k: statistics.median(v) for k, v in rows.items()},
        "identical_to_hf_greedy": same,
    }
    res["ratios"] = ratios(res["median_tok_s"])
    print(json.dumps(res, indent=1))
    write_results(res, a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
