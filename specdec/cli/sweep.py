"""Sweep the draft length k and plot measured against predicted speedup (docs/theory-measured.md).

Runs ``none`` and one row per (method, k) on the same prompts, interleaved, at temperature 0, and
writes the numbers as JSON and the plot as SVG. The predictions (textbook, bench, per position,
step cost) are defined in specdec/bench/sweep.py; the comparison is in docs/theory-measured.md.

examples:
  specdec sweep                                     # draft and lookup, k = 1,2,3,4,6,8, 16 prompts
  specdec sweep --prompts assets/prompts/edits.jsonl --methods lookup --json out.json --svg out.svg
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specdec.cli.args import DEFAULT_PROMPTS


def add_arguments(p: argparse.ArgumentParser) -> None:
    from specdec.cli.args import add_model_args

    p.add_argument("--prompts", type=Path, default=DEFAULT_PROMPTS, help="JSONL prompt file (default: %(default)s)")
    p.add_argument("--limit", type=int, default=16, help="first N prompts (default: 16)")
    p.add_argument("--k", default="1,2,3,4,6,8", help="comma list of draft lengths (default: 1,2,3,4,6,8)")
    p.add_argument("--methods", default="draft,lookup", help="comma list of methods to sweep (default: draft,lookup)")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds of every row first (default: 1)")
    p.add_argument(
        "--confidence",
        type=float,
        default=0.0,
        help="draft confidence cut-off (default 0: always draft k tokens, as the theory assumes)",
    )
    p.add_argument("--json", type=Path, default=Path("docs/results/sweep-k-cpu.json"), help="where the numbers go")
    p.add_argument("--svg", type=Path, default=Path("docs/results/sweep-k-cpu.svg"), help="where the plot goes")
    p.add_argument("--title", default="Speedup against k (shipped models, CPU)")
    p.add_argument(
        "--from-json",
        type=Path,
        default=None,
        metavar="FILE",
        help="run nothing: recompute the predictions and redraw the plot from a saved sweep JSON",
    )
    p.add_argument("--no-progress", action="store_true")
    add_model_args(p, default="tiny")


def run(args: argparse.Namespace) -> int:
    from specdec.bench.run import load_prompts
    from specdec.bench.sweep import add_predictions, sweep
    from specdec.core.config import ConfigError, parse_k
    from specdec.engine.load import engine_from_args as load_engine

    try:
        ks = [parse_k(k) for k in args.k.split(",")]
    except ConfigError as e:
        raise ConfigError(f"--k: {e}") from None
    if "auto" in ks:
        raise ConfigError("--k: the sweep needs fixed draft lengths, not auto")
    if args.from_json is not None:
        return _write(args, add_predictions(json.loads(args.from_json.read_text(encoding="utf-8"))))
    engine = load_engine(args)
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in engine.methods]
    if unknown:
        raise ConfigError(f"unknown method(s) {', '.join(unknown)}; available: {', '.join(engine.methods)}")
    prompts = load_prompts(args.prompts, args.limit, tokenizer=engine.tokenizer)
    result = sweep(
        engine, prompts, ks, methods, args.max_new_tokens, args.warmup, args.confidence, progress=not args.no_progress
    )
    result["config"]["prompts"] = str(args.prompts)
    return _write(args, result)


def _write(args: argparse.Namespace, result: dict) -> int:
    from specdec.bench.sweep import format_rows, plot

    print(format_rows(result))
    for path, text in ((args.json, json.dumps(result, indent=2) + "\n"), (args.svg, plot(result, args.title))):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)
    return 0
