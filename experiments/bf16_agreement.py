"""How often bf16 greedy paths part on the real model (issue 30, item 5).

Why: in bf16 a (k+1)-row verify forward can round differently from the one-row forward of plain
decoding, so a speculative method's greedy tokens can leave plain decoding's at a near-tie; fp32
does not (tests/test_real_model.py proves identity there). This trial measures it instead of
hiding it: per prompt (rendered through the chat template where the record has ``messages``), the
greedy tokens of our ``none`` and ``lookup`` in bf16, transformers' greedy in bf16, and our
``none`` in fp32; it reports, per pair, on how many prompts the tokens are identical and where the
first difference falls.

Usage: ``python -m experiments.bf16_agreement --prompts assets/prompts/chat.jsonl --limit 16 --json out.json``.
Not part of the engine: a measurement to quote in docs/models.md.
"""

from __future__ import annotations

import argparse
import json

import torch

from specdec.catalog.resolve import resolve
from specdec.core.config import GenerateSpec
from specdec.engine.chat import has_template, render
from specdec.engine.load import load_engine


def prompts(path: str, limit: int) -> list:
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    return rows[:limit]


def text_of(engine, row: dict) -> str:
    if "messages" in row and has_template(engine.tokenizer):
        return render(engine.tokenizer, row["messages"])
    return row.get("prompt") or row["messages"][-1]["content"]


def ours(engine, ids, method: str, n: int) -> list[int]:
    return engine.generate(ids, GenerateSpec(method=method, max_new_tokens=n)).tokens


def theirs(engine, ids, n: int) -> list[int]:
    with torch.inference_mode():
        out = engine.target.model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False)
    return out[0, len(ids) :].tolist()


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--limit", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    choice = resolve(args.model, no_draft=True)
    rows = prompts(args.prompts, args.limit)
    runs: dict[str, list[list[int]]] = {}
    for dtype in ("bfloat16", "float32"):
        engine = load_engine(choice.target, None, "cpu", dtype, "auto")
        for row in rows:
            ids = engine.encode(text_of(engine, row))
            runs.setdefault(f"none/{dtype}", []).append(ours(engine, ids, "none", args.max_new_tokens))
            if dtype == "bfloat16":
                runs.setdefault("lookup/bfloat16", []).append(ours(engine, ids, "lookup", args.max_new_tokens))
                runs.setdefault("hf/bfloat16", []).append(theirs(engine, ids, args.max_new_tokens))
        del engine
    pairs = [("lookup/bfloat16", "none/bfloat16"), ("none/bfloat16", "hf/bfloat16"), ("none/bfloat16", "none/float32")]
    report = {"model": args.model, "prompts": args.prompts, "n": len(rows), "max_new_tokens": args.max_new_tokens}
    for a, b in pairs:
        diffs = [first_difference(x, y) for x, y in zip(runs[a], runs[b])]
        report[f"{a} vs {b}"] = {"identical": sum(d is None for d in diffs), "first_difference": diffs}
        print(f"{a} vs {b}: identical on {sum(d is None for d in diffs)} of {len(diffs)}; first differences {diffs}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
