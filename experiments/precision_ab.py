"""Proposer weight precision A/B (issue 14): each proposer in float32 against the calibrated precision.

Why: ``specdec/fast/lowp.py`` lets calibration give a proposer float16 or int8 weights when its decoding
work, timed right after a target step, is faster; this trial checks the end-to-end effect in one
process, so both sides see the same machine state: per prompt it runs ``none`` and each of
``draft``, ``medusa`` and ``eagle`` once in float32 and once in the precision calibration chose
(row order reversed on every other prompt), greedy, and sums tokens and seconds per row. Every run
must give ``none``'s tokens (checked: the verifier is float32 whatever the proposer's precision).

Usage: ``python -m experiments.precision_ab --offset 0 --limit 20 --json out.json``.
Not part of the engine: a measurement to quote in docs/bench.md.
"""

from __future__ import annotations

import argparse
import time

from specdec.bench.results import write_results
from specdec.bench.run import load_prompts
from specdec.cli.args import DEFAULT_PROMPTS
from specdec.core.config import GenerateSpec, SamplingParams
from specdec.engine.session import Engine

METHODS = ("draft", "medusa", "eagle")


def _rows(engine) -> list[tuple[str, str]]:
    chosen = engine.calibration.choices.get("precision", {})
    rows = [("none", "-")]
    for m in METHODS:
        rows += [(m, p) for p in dict.fromkeys(("fp32", chosen.get(m, "fp32")))]
    return rows


def run(engine, prompts: list[str], max_new: int) -> dict:
    spec = lambda m: GenerateSpec(method=m, max_new_tokens=max_new, sampling=SamplingParams(temperature=0.0))
    rows = _rows(engine)
    sums = {r: [0, 0.0] for r in rows}
    identical = dict.fromkeys(rows, 0)
    for prompt in prompts[:2]:  # warm-up, untimed
        for m in ("none", *METHODS):
            engine.generate(prompt, spec(m))
    try:
        for i, prompt in enumerate(prompts):
            want = engine.generate(prompt, spec("none")).tokens
            for m, p in rows if i % 2 == 0 else rows[::-1]:
                if m != "none":
                    engine.proposers[m].set_precision(p)
                t0 = time.perf_counter()
                got = engine.generate(prompt, spec(m)).tokens
                sums[(m, p)][1] += time.perf_counter() - t0
                sums[(m, p)][0] += len(got)
                identical[(m, p)] += got == want
    finally:
        chosen = engine.calibration.choices.get("precision", {})
        for m in METHODS:
            engine.proposers[m].set_precision(chosen.get(m, "fp32"))
    base = sums[("none", "-")][0] / sums[("none", "-")][1]
    out = {}
    for (m, p), (n, s) in sums.items():
        out[f"{m}/{p}"] = {"tokens": n, "seconds": s, "tokens_per_s": n / s, "vs_none": n / s / base}
        out[f"{m}/{p}"]["identical"] = f"{identical[(m, p)]}/{len(prompts)}"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default=str(DEFAULT_PROMPTS))
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    engine = Engine.load(calibration="auto")
    prompts = load_prompts(args.prompts)[args.offset : args.offset + args.limit]
    rows = run(engine, prompts, args.max_new_tokens)
    for name, r in rows.items():
        print(f"{name:14s} {r['tokens_per_s']:7.1f} tok/s  {r['vs_none']:.2f}x none  identical {r['identical']}")
    chosen = engine.calibration.choices.get("precision", {})
    res = {"config": vars(args) | {"chosen": chosen, "calibration": engine.calibration.to_dict()}, "rows": rows}
    write_results(res, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
