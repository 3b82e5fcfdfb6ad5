"""Where prompt lookup's accepted tokens come from: an n-gram match in the prompt, or in the text
the model generated itself (docs/theory-lookup.md).

Usage: PYTHONPATH=. python scripts/lookup_sources.py FILE.jsonl [--limit N] [--k 8]

For every step of a greedy `lookup` generation it repeats the proposer's search rule (the most
recent earlier occurrence of the last 3, then 2, tokens) on the tokens committed so far, and counts
the step's accepted tokens under "prompt" when the copied span starts inside the prompt, else under
"generated". The most recent occurrence wins, so text the model already copied into its output
counts as "generated".
"""

from __future__ import annotations

import argparse

from specdec.core.seq import match_start  # the engine's own n-gram rule, so the recount cannot drift from it


def main() -> None:
    from specdec.bench.run import load_prompts
    from specdec.core.config import GenerateSpec
    from specdec.engine.session import Engine

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prompts")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    opt = ap.parse_args()
    engine = Engine.load()
    counts = {"prompt": 0, "generated": 0}
    total = 0
    for prompt in load_prompts(opt.prompts, opt.limit):
        ids = engine.encode(prompt)
        tokens = list(ids)
        spec = GenerateSpec(method="lookup", k=opt.k, max_new_tokens=opt.max_new_tokens)
        for ev in engine.stream(ids, spec):
            if ev.draft_size:
                start = match_start(tokens, spec.ngram_max, spec.ngram_min)
                where = "prompt" if start is not None and start < len(ids) else "generated"
                counts[where] += sum(pc.kind == "accepted" for pc in ev.pieces)
            tokens += ev.token_ids
            total += len(ev.token_ids)
    print(
        f"{opt.prompts}: {total} tokens generated; accepted lookup tokens copied from the prompt: "
        f"{counts['prompt']}, from the generated text: {counts['generated']}"
    )


if __name__ == "__main__":
    main()
