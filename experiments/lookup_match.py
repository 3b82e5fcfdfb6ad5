"""Prompt lookup: the engine's most-recent match against the earliest match of the references.

Contract: ``python -m experiments.lookup_match [--limit N] [--max-new-tokens T] [--json PATH]`` loads the
shipped models (``specdec.engine.session.Engine.load()``) and, for every prompt of ``assets/prompts/code.jsonl``
and ``assets/prompts/edits.jsonl``, runs three rows at temperature 0 in rotating order: ``none``
(plain decoding), ``recent`` (the engine's own ``lookup`` proposer: the most recent earlier
occurrence of the longest suffix n-gram) and ``earliest`` (the ``EarliestLookup`` proposer below,
swapped in for the engine's lookup proposer during its rows: the earliest occurrence, the rule of
Saxena's prompt-lookup-decoding, transformers' ``PromptLookupCandidateGenerator`` and vLLM V1's
``_find_longest_matched_ngram_and_propose_tokens``), plus ``recent_min1`` (the engine's lookup with
single-token matches allowed). The lookups use n = 3 down to 2 (1) and k = 8. It writes, per prompt
set and row: tau (tokens per target forward), alpha (accepted / drafted), drafted tokens per step,
the share of steps with a match, tokens/s (pooled and median per prompt), ``identical`` (prompts
whose tokens equal ``none``'s), and where the accepted copies came from (``from_prompt`` /
``from_generated``: the copied span starts inside the prompt or in generated text; the span is
re-found with the row's own rule, and ``resync_misses`` counts steps whose first drafted token
disagrees with it, 0 when the recomputation is right). tau and alpha are deterministic at
temperature 0; tokens/s depends on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.core.proposer import Context
from specdec.core.seq import find_continuation, match_start
from specdec.core.tree import Draft
from specdec.engine.session import Engine

SETS = {"code": "assets/prompts/code.jsonl", "edits": "assets/prompts/edits.jsonl"}
ROWS = ("none", "recent", "earliest", "recent_min1")
RULES = {"recent": (3, 2, False), "earliest": (3, 2, True), "recent_min1": (3, 1, False)}  # n max, n min, earliest


class EarliestLookup:
    """The engine's prompt lookup with the references' choice of match: the earliest occurrence."""

    name = "lookup"

    def propose(self, ctx: Context) -> Draft:
        budget = min(ctx.k_max or ctx.budget, ctx.budget)
        cont = find_continuation(ctx.tokens, ctx.spec.ngram_max, ctx.spec.ngram_min, budget, earliest=True)
        return Draft.chain(torch.tensor(cont, dtype=torch.long)) if cont and budget > 0 else Draft.empty()


def sources(ids: list[int], events: list, rule: tuple[int, int, bool]) -> dict[str, int]:
    """Accepted copies by where their span starts (prompt or generated), re-found with ``rule``."""
    out = {"from_prompt": 0, "from_generated": 0, "resync_misses": 0}
    tokens = list(ids)
    for ev in events:
        if ev.draft_size:
            start = match_start(tokens, *rule)
            drafted = [pc.token_id for pc in ev.pieces if pc.kind in ("accepted", "rejected")]
            out["resync_misses"] += start is None or not drafted or tokens[start] != drafted[0]
            out["from_prompt" if start is not None and start < len(ids) else "from_generated"] += sum(
                pc.kind == "accepted" for pc in ev.pieces
            )
        tokens += ev.token_ids
    return out


def run_one(engine: Engine, prompt: str, row: str, max_new: int) -> dict:
    spec = GenerateSpec(
        method="none" if row == "none" else "lookup",
        k="auto" if row == "none" else 8,
        ngram_min=1 if row == "recent_min1" else 2,
        max_new_tokens=max_new,
        sampling=SamplingParams(temperature=0.0),
    )
    own = engine.proposers["lookup"]
    if row == "earliest":  # a measurement swaps the engine's lookup proposer for this row only
        engine.proposers["lookup"] = EarliestLookup()
    try:
        events = list(engine.stream(prompt, spec))
    finally:
        engine.proposers["lookup"] = own
    st = events[-1].stats
    src = sources(engine.encode(prompt), events, RULES[row]) if row in RULES else {}
    return {
        "tokens": [t for ev in events for t in ev.token_ids],
        "emitted": st.emitted,
        "forwards": st.target_forwards,
        "drafted": st.drafted,
        "accepted": st.accepted,
        "matched": sum(ev.draft_size > 0 for ev in events),
        "elapsed_s": st.elapsed_s,
        **src,
    }


def summarise(res: list[dict], base: list[dict]) -> dict:
    keys = (
        "emitted",
        "forwards",
        "drafted",
        "accepted",
        "matched",
        "elapsed_s",
        "from_prompt",
        "from_generated",
        "resync_misses",
    )
    tot = {k: sum(r.get(k, 0) for r in res) for k in keys}
    alpha = tot["accepted"] / tot["drafted"] if tot["drafted"] else None
    return {
        "tau": tot["emitted"] / tot["forwards"],
        "alpha": alpha,
        "drafted_per_step": tot["drafted"] / tot["forwards"],
        "match_share": tot["matched"] / tot["forwards"],
        "tokens_per_s": tot["emitted"] / tot["elapsed_s"],
        "tokens_per_s_median": statistics.median(r["emitted"] / r["elapsed_s"] for r in res),
        "identical": sum(r["tokens"] == b["tokens"] for r, b in zip(res, base)),
        "n_prompts": len(res),
        "total_tokens": tot["emitted"],
        **{k: tot[k] for k in keys[-3:]},
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="first N prompts of each set")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--json", default="docs/results/lookup-match-cpu.json")
    args = ap.parse_args(argv)
    engine = Engine.load(heads=False, calibration="auto")
    out = {
        "config": {
            "max_new_tokens": args.max_new_tokens,
            "limit": args.limit,
            "temperature": 0.0,
            "k": 8,
            "ngram_max": 3,
            "ngram_min": 2,
            "rows": list(ROWS),
            "order": "rotating per prompt",
            "machine": {
                "platform": platform.platform(),
                "torch": torch.__version__,
                "torch_threads": torch.get_num_threads(),
                "cpu_count": __import__("os").cpu_count(),
            },
        },
        "sets": {},
    }
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
        print(
            name,
            {
                row: {k: round(v, 3) if isinstance(v, float) else v for k, v in out["sets"][name][row].items()}
                for row in ROWS
            },
            flush=True,
        )
    out["config"]["wall_s"] = time.perf_counter() - t0
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", args.json)


if __name__ == "__main__":
    main()
