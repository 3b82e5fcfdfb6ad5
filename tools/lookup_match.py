"""Prompt lookup: the engine's most-recent match against the earliest match of the references.

Contract: ``python -m tools.lookup_match [--limit N] [--max-new-tokens T] [--json PATH]`` loads the
shipped models (``engine.session.Engine.load()``) and, for every prompt of ``assets/prompts/code.jsonl``
and ``assets/prompts/edits.jsonl``, runs three rows at temperature 0 in rotating order: ``none``
(plain decoding), ``recent`` (the engine's own ``lookup`` proposer: the most recent earlier
occurrence of the longest suffix n-gram) and ``earliest`` (the ``EarliestLookup`` proposer below,
passed through ``Engine.stream(prompt, spec, proposer=...)``: the earliest occurrence, the rule of
Saxena's prompt-lookup-decoding, transformers' ``PromptLookupCandidateGenerator`` and vLLM V1's
``_find_longest_matched_ngram_and_propose_tokens``). Both lookups use n = 3 down to 2 and k = 8.
It writes, per prompt set and row: tau (tokens per target forward), alpha (accepted / drafted),
drafted tokens per step, the share of steps with a match, tokens/s (pooled and median per prompt)
and ``identical`` (prompts whose tokens equal ``none``'s). tau and alpha are deterministic at
temperature 0; tokens/s depends on the machine's load.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from engine.config import GenerateSpec, SamplingParams
from engine.proposers.base import Context
from engine.session import Engine
from engine.tree import Draft

SETS = {"code": "assets/prompts/code.jsonl", "edits": "assets/prompts/edits.jsonl"}
ROWS = ("none", "recent", "earliest")


def earliest_continuation(tokens: list[int], ngram_max: int, ngram_min: int, budget: int) -> list[int]:
    """Up to ``budget`` tokens after the EARLIEST earlier occurrence of the longest suffix n-gram."""
    seq = np.asarray(tokens, dtype=np.int64)
    L = len(seq)
    for n in range(min(ngram_max, L - 1), ngram_min - 1, -1):
        suffix = seq[L - n:]
        for s in np.flatnonzero(seq[: L - n] == suffix[0]):  # ascending: the first hit is the earliest
            if np.array_equal(seq[s:s + n], suffix):
                return seq[s + n: s + n + budget].tolist()
    return []


class EarliestLookup:
    """A deterministic (q = None) chain proposer; everything but the choice of match as the engine's."""

    name = "lookup"

    def __init__(self, k: int = 8, ngram_max: int = 3, ngram_min: int = 2) -> None:
        self.k, self.ngram_max, self.ngram_min = k, ngram_max, ngram_min

    def propose(self, ctx: Context) -> Draft:
        cont = earliest_continuation(ctx.tokens, self.ngram_max, self.ngram_min, min(self.k, ctx.budget))
        return Draft.chain(torch.tensor(cont, dtype=torch.long)) if cont else Draft.empty()


def run_one(engine: Engine, prompt: str, row: str, max_new: int) -> dict:
    spec = GenerateSpec(method="none" if row == "none" else "lookup", k="auto" if row == "none" else 8,
                        max_new_tokens=max_new, sampling=SamplingParams(temperature=0.0))
    events = list(engine.stream(prompt, spec, proposer=EarliestLookup() if row == "earliest" else None))
    st = events[-1].stats
    return {"tokens": [t for ev in events for t in ev.token_ids], "emitted": st.emitted, "forwards": st.target_forwards,
            "drafted": st.drafted, "accepted": st.accepted, "matched": sum(ev.draft_size > 0 for ev in events),
            "elapsed_s": st.elapsed_s}


def summarise(res: list[dict], base: list[dict]) -> dict:
    tot = {k: sum(r[k] for r in res) for k in ("emitted", "forwards", "drafted", "accepted", "matched", "elapsed_s")}
    return {"tau": tot["emitted"] / tot["forwards"], "alpha": tot["accepted"] / tot["drafted"] if tot["drafted"] else None,
            "drafted_per_step": tot["drafted"] / tot["forwards"], "match_share": tot["matched"] / tot["forwards"],
            "tokens_per_s": tot["emitted"] / tot["elapsed_s"],
            "tokens_per_s_median": statistics.median(r["emitted"] / r["elapsed_s"] for r in res),
            "identical": sum(r["tokens"] == b["tokens"] for r, b in zip(res, base)), "n_prompts": len(res),
            "total_tokens": tot["emitted"]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="first N prompts of each set")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--json", default="docs/results/lookup-match-cpu.json")
    args = ap.parse_args(argv)
    engine = Engine.load(heads=False)
    out = {"config": {"max_new_tokens": args.max_new_tokens, "limit": args.limit, "temperature": 0.0, "k": 8,
                      "ngram_max": 3, "ngram_min": 2, "rows": list(ROWS), "order": "rotating per prompt",
                      "machine": {"platform": platform.platform(), "torch": torch.__version__,
                                  "torch_threads": torch.get_num_threads(), "cpu_count": __import__("os").cpu_count()}},
           "sets": {}}
    engine.generate("def f(x):\n    return x\n", GenerateSpec(method="none", max_new_tokens=16))  # warm-up
    t0 = time.perf_counter()
    for name, path in SETS.items():
        prompts = [json.loads(line)["prompt"] for line in Path(path).read_text().splitlines() if line.strip()]
        prompts = prompts[: args.limit] if args.limit else prompts
        res: dict[str, list[dict]] = {row: [] for row in ROWS}
        for i, prompt in enumerate(prompts):
            for j in range(len(ROWS)):
                row = ROWS[(i + j) % len(ROWS)]
                res[row].append(run_one(engine, prompt, row, args.max_new_tokens))
        out["sets"][name] = {"prompts": path, **{row: summarise(res[row], res["none"]) for row in ROWS}}
        print(name, {row: {k: round(v, 3) if isinstance(v, float) else v for k, v in out["sets"][name][row].items()}
                     for row in ROWS}, flush=True)
    out["config"]["wall_s"] = time.perf_counter() - t0
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", args.json)


if __name__ == "__main__":
    main()
