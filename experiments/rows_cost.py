"""What one target forward costs as a function of the rows it scores, and what that does to r.

Contract: ``python -m experiments.rows_cost [--repeats R] [--json PATH]`` loads the shipped target, prefills
the first shipped prompt, and times ``Target.score`` over n = 1..64 new rows (a chain of n - 1 draft
tokens after the pending token), R times each in rotating order, restoring the cache after every
forward. It writes the median, 10th and 90th percentile ms per n, and, per n, the largest absolute
difference between row 0's logits in the n-row forward and in the 1-row forward (the same position:
a wider forward may round differently). r for one request drafting k tokens is t(k + 1) / t(1); for
a batch of B requests it is t(B (k + 1)) / t(B) (``specdec.core.theory.batch_verify_ratio`` with a line fitted
to these times); rows of one sequence stand in for rows of B sequences here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from specdec.core.tree import Draft
from specdec.engine.session import Engine

NS = (1, 2, 3, 4, 5, 6, 8, 9, 12, 16, 24, 32, 48, 64)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--json", default="docs/results/rows-cost-cpu.json")
    args = ap.parse_args(argv)
    engine = Engine.load(heads=False, calibration="auto")
    target = engine.target
    prompt = json.loads(Path("assets/prompts/code.jsonl").read_text().splitlines()[0])["prompt"]
    ids = engine.encode(prompt)
    target.prefill(ids)
    filler = ids[: max(NS)]
    times: dict[int, list[float]] = {n: [] for n in NS}
    row0: dict[int, torch.Tensor] = {}
    for rep in range(args.repeats + 2):  # two untimed warm-up rounds
        for j in range(len(NS)):
            n = NS[(rep + j) % len(NS)]
            target.prefill(ids)
            t0 = time.perf_counter()
            scored = target.score(ids[-1], Draft.chain(torch.tensor(filler[: n - 1], dtype=torch.long)))
            dt = 1000 * (time.perf_counter() - t0)
            target.commit(())
            if rep >= 2:
                times[n].append(dt)
            row0.setdefault(n, scored[0].clone())

    def q(xs: list[float], f: float) -> float:
        return sorted(xs)[int(f * (len(xs) - 1))]

    out = {
        "config": {
            "prompt_tokens": len(ids),
            "repeats": args.repeats,
            "rows": list(NS),
            "machine": {
                "platform": platform.platform(),
                "torch": torch.__version__,
                "torch_threads": torch.get_num_threads(),
                "cpu_count": os.cpu_count(),
                "load_avg_1min": os.getloadavg()[0],
            },
        },
        "ms_median": [statistics.median(times[n]) for n in NS],
        "ms_p10": [q(times[n], 0.1) for n in NS],
        "ms_p90": [q(times[n], 0.9) for n in NS],
        "row0_max_abs_logit_diff": [float((row0[n] - row0[1]).abs().max()) for n in NS],
        "row0_argmax_same": [bool(row0[n].argmax() == row0[1].argmax()) for n in NS],
    }
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "config"}))


if __name__ == "__main__":
    main()
