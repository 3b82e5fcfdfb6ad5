"""What the int4 weights cost in precision on the real model (issue 31, deliverable 1).

Why: ``--weights int4`` re-packs the GGUF's Q4_1 blocks for torch's int4 kernel (bfloat16 scales
and zero points, bfloat16 activations into each linear; the LM head in Q8_0's int8 form), so its
logits are not the dequantized fp32 model's. This measures by how much instead of asserting it:
teacher-forced on each prompt's fp32 greedy continuation, the max and mean absolute logit error
of int4 against fp32 and the share of positions whose argmax agrees; and the free-running greedy
agreement (identical continuations, mean common prefix) of our int4 plain decoding with
transformers' fp32 greedy.

Usage: ``python -m experiments.int4_precision --prompts all --limit 1 --n 64 [--weights q4_1] --json out.json``.
``--weights q4_1`` measures the native Q4_1 x int8 kernel (``models/blocks.py``) the same way.
Not part of the engine: a measurement to quote in docs/log/memwall.md (its results:
docs/results/int4-precision-smollm2.json, q4_1-precision-smollm2.json).
"""

from __future__ import annotations

import argparse
import json

import torch

from specdec.bench.prompts import load_items
from specdec.catalog.resolve import resolve
from specdec.core.config import GenerateSpec
from specdec.core.tree import Draft
from specdec.engine.load import load_engine


def _prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _logits(engine, ids: list[int], ref: list[int]) -> torch.Tensor:
    """The logits predicting each token of ``ref`` after ``ids``, as plain decoding computes them
    (fp32: transformers' one forward)."""
    t = engine.target
    t.reset()
    with torch.inference_mode():
        if t.weights == "fp32":
            return t.model(torch.tensor([ids + ref])).logits[0, len(ids) - 1 : -1].float()
        t.prefill(ids)
        rows = []
        for tok in [ids[-1]] + ref[:-1]:
            rows.append(t.score(tok, Draft.empty())[0])
            t.commit(())
        return torch.stack(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="all")
    ap.add_argument("--limit", type=int, default=1)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--json", default=None)
    ap.add_argument("--weights", default="int4", help="the 4-bit format measured: int4 or q4_1")
    a = ap.parse_args()
    choice = resolve("smollm2-135m")
    engine = load_engine(choice.target, None, "cpu", "float32", "auto", heads=None)
    items = load_items(a.prompts, a.limit, 0, None)
    out = []
    for it in items:
        ids = engine.encode(it.text(engine.tokenizer))
        with torch.inference_mode():
            ref = engine.target.model.generate(torch.tensor([ids]), max_new_tokens=a.n, do_sample=False)
        ref = ref[0, len(ids) :].tolist()
        engine.set_weights("fp32")
        lf = _logits(engine, ids, ref)
        engine.set_weights(a.weights)
        lq = _logits(engine, ids, ref)
        mine = engine.generate(ids, GenerateSpec(method="none", max_new_tokens=a.n)).tokens
        engine.set_weights("fp32")
        err = (lq - lf).abs()
        row = {
            "category": it.category,
            "logit_err_max": round(float(err.max()), 3),
            "logit_err_mean": round(float(err.mean()), 4),
            "argmax_agree": round(float((lq.argmax(-1) == lf.argmax(-1)).float().mean()), 3),
            "identical": mine == ref,
            "common_prefix": _prefix(mine, ref),
        }
        print(row, flush=True)
        out.append(row)
    summary = {
        "weights": a.weights,
        "prompts": len(out),
        "identical": sum(r["identical"] for r in out),
        "mean_common_prefix": sum(r["common_prefix"] for r in out) / len(out),
        "argmax_agree": sum(r["argmax_agree"] for r in out) / len(out),
        "logit_err_max": max(r["logit_err_max"] for r in out),
    }
    print(summary)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"rows": out, "summary": summary, "n": a.n}, f, indent=1)


if __name__ == "__main__":
    main()
