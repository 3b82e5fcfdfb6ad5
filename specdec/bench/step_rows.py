"""What one batched decoding step costs against its rows and their cached length.

Why: a CPU decoding step of the shipped target is bound by memory traffic, not arithmetic. Every
step reads the weights once, whatever the rows, and every row's own keys and values, which grow
with its context. While weights and keys fit the last-level cache a step over eight rows costs
little more than over one; past it, each row adds its cache's bytes from DRAM. The same eight
tokens as ONE row's chain (a speculative step) read one row's keys only, so speculation and
batching do not cost the same per token. This tool measures that picture on the running machine
(machines of this kind differ: a 32 MB and a 105 MB L3 were met), so docs/batching.md can say
why eight clients are not eight times one and a reader can check it on theirs.

Contract: ``python -m specdec.bench.step_rows [--rows 1,2,4,8,16] [--prefixes 32,128,256,384]
[--threads LIST] [--repeats R] [--json PATH]`` builds the batch target as ``BatchBackend`` does
(the engine's calibrated forward) and times ``BatchTarget.score`` (``threads.time_rows``): B rows
of one pending token each, every row's slot holding L cached positions, and, for each B > 1, ONE
row scoring a chain of B tokens at the same L. Cells run in rotating order, two untimed rounds
first. Per cell: median / p10 / p90 ms and ``mb_read``, the bytes the step must read (all
weights + rows x L x the KV bytes per position). Per thread count, a least-squares line of ms
against MB read over the many-row cells: ``ms_fixed`` (the step's cost at no bytes) and
``gb_per_s`` (1 / slope). Speed is measured here, never asserted; run it under an exclusive lock
(``flock /tmp/specdec-bench.lock``) on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
from pathlib import Path

import torch

from specdec.bench.results import write_results
from specdec.core.theory import fit_verify_cost
from specdec.engine.session import Engine
from specdec.fast.threads import time_rows
from specdec.models.batch_target import BatchTarget
from specdec.serving.batch.memory import kv_bytes_per_token, plan_slots


def l3_bytes() -> int | None:
    """The last-level cache of CPU 0 as sysfs reports it (None where it does not)."""
    try:
        text = Path("/sys/devices/system/cpu/cpu0/cache/index3/size").read_text().strip()
    except OSError:
        return None
    scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
    return int(text.rstrip("KM")) * scale


def fit_line(points: list[tuple[float, float]]) -> dict | None:
    """ms = ms_fixed + MB / gb_per_s (MB per ms is GB/s): least squares over (MB, ms) points."""
    if len({x for x, _ in points}) < 2:
        return None
    ms_fixed, slope = fit_verify_cost([x for x, _ in points], [y for _, y in points])  # the one least squares
    return {"ms_fixed": ms_fixed, "gb_per_s": 1.0 / slope if slope > 0 else None}


def _cells(rows: list[int], prefixes: list[int]) -> list[tuple[int, int, int]]:
    """(rows, q, prefix): B rows of one token, and for B > 1 one row of a B-token chain."""
    out = []
    for L in prefixes:
        for b in rows:
            out.append((b, 1, L))
            if b > 1:
                out.append((1, b, L))
    return out


def measure(target: BatchTarget, cells, threads: int, repeats: int, weight_mb: float, kv_mb: float) -> list[dict]:
    torch.set_num_threads(threads)
    times: dict[tuple, list[float]] = {c: [] for c in cells}
    for rep in range(repeats + 2):
        for j in range(len(cells)):
            cell = cells[(rep + j) % len(cells)]
            ms = time_rows(target, cell[0], cell[1], cell[2])
            if rep >= 2:
                times[cell].append(ms)
    out = []
    for (b, q, L), xs in times.items():
        xs = sorted(xs)
        out.append(
            {
                "threads": threads,
                "rows": b,
                "q": q,
                "prefix": L,
                "ms_median": statistics.median(xs),
                "ms_p10": xs[int(0.1 * (len(xs) - 1))],
                "ms_p90": xs[int(0.9 * (len(xs) - 1))],
                "mb_read": weight_mb + b * (L + q) * kv_mb,
            }
        )
    return out


def markdown(res: dict) -> str:
    """docs/batching.md's table: per thread count and prefix, ms of B rows and of one B-token chain."""
    cells, rows = res["cells"], res["config"]["rows"]
    at = {(c["threads"], c["rows"], c["q"], c["prefix"]): c["ms_median"] for c in cells}
    head = ["threads", "L"] + [f"{b} rows" for b in rows] + [f"chain of {b}" for b in rows if b > 1]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in sorted({c["threads"] for c in cells}):
        for L in res["config"]["prefixes"]:
            ms = [at[(n, b, 1, L)] for b in rows] + [at[(n, 1, b, L)] for b in rows if b > 1]
            out.append(f"| {n} | {L} | " + " | ".join(f"{x:.1f}" for x in ms) + " |")
    fits = [
        f"{n} thread(s): {f['ms_fixed']:.1f} ms + MB read / {f['gb_per_s']:.1f} GB/s"
        for n, f in res["fits"].items()
        if f and f["gb_per_s"]
    ]
    return "\n".join(out) + "\n\nms of a step against the MB it must read (many-row cells): " + "; ".join(fits)


def table(cells: list[dict]) -> str:
    lines = [f"{'threads':>7} {'rows':>4} {'q':>3} {'L':>4} {'ms':>7} {'ms/row-token':>12} {'MB read':>8}"]
    for c in cells:
        per = c["ms_median"] / (c["rows"] * c["q"])
        lines.append(
            f"{c['threads']:>7} {c['rows']:>4} {c['q']:>3} {c['prefix']:>4} {c['ms_median']:>7.2f} "
            f"{per:>12.2f} {c['mb_read']:>8.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    ap.add_argument("--rows", type=ints, default=[1, 2, 4, 8, 16], help="rows per step (default 1,2,4,8,16)")
    ap.add_argument(
        "--prefixes", type=ints, default=[32, 128, 256, 384], help="cached positions per row (default 32,128,256,384)"
    )
    ap.add_argument("--threads", type=ints, default=None, help="torch threads to try (default: the calibrated)")
    ap.add_argument("--repeats", type=int, default=15, help="timed rounds per cell (default 15)")
    ap.add_argument("--json", default=None, help="write the cells and fits as JSON here")
    args = ap.parse_args(argv)
    engine = Engine.load(heads=False, calibration="auto")
    t = engine.target
    slots, capacity = plan_slots(t.model, engine.context, max(args.rows), None)
    if max(args.prefixes) + max(args.rows) >= capacity:
        ap.error(f"--prefixes: a prefix plus its chain must stay below the slot capacity {capacity}")
    target = BatchTarget(t.model, slots, capacity, t.vocab, lean=t.lean, head=t.head)
    target.use(t.path)
    weight_mb = sum(p.numel() * p.element_size() for p in t.model.parameters()) / 1e6
    kv_mb = kv_bytes_per_token(t.model) / 1e6
    threads = args.threads or [torch.get_num_threads()]
    cells = []
    for n in threads:
        cells += measure(target, _cells(args.rows, args.prefixes), n, args.repeats, weight_mb, kv_mb)
    rows_only = [c for c in cells if c["q"] == 1]
    fits = {str(n): fit_line([(c["mb_read"], c["ms_median"]) for c in rows_only if c["threads"] == n]) for n in threads}
    res = {
        "config": {
            "rows": args.rows,
            "prefixes": args.prefixes,
            "repeats": args.repeats,
            "target_path": target.path,
            "weight_mb": weight_mb,
            "kv_kb_per_position": 1000 * kv_mb,
            "machine": {
                "platform": platform.platform(),
                "processor": platform.processor(),
                "cpu_count": os.cpu_count(),
                "l3_bytes": l3_bytes(),
                "torch": torch.__version__,
                "load_avg_1min": os.getloadavg()[0],
            },
        },
        "cells": cells,
        "fits": fits,
    }
    print(table(cells))
    for n, f in fits.items():
        if f:
            print(f"threads {n}: ms = {f['ms_fixed']:.2f} + MB read / {f['gb_per_s'] or float('inf'):.1f} GB/s")
    write_results(res, args.json)


if __name__ == "__main__":
    main()
