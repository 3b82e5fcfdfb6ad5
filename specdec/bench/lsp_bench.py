"""Latency benchmark of `specdec lsp`: completion requests replayed through a real LSP client over stdio.

Usage: ``python -m specdec.bench.lsp_bench [--limit N] [--positions P] [--methods none,lookup,draft] [--json OUT]``.

Contract: it starts ``python -m specdec lsp`` as a subprocess, talks to it with pygls' own
language client, and for every held-out document (the shipped prompts, cut from files no model
trained on) picks ``--positions`` cursor positions in the middle of lines (seeded). The default
scenario is a user writing the file top to bottom: the document holds the text up to the cursor
(``--scenario middle``: the lines below the cursor's line are there too, as when editing inside a
file; the rest of the cursor's own line never is). At each
position, every method runs once, in an order that rotates from position to position; before
each timed request the editor "asked a keystroke ago" (an untimed 1-token request one character
earlier, which also leaves the target's cache warm, as in real typing; ``--cold`` skips it). The
timed figure is the client's wall time from sending ``textDocument/completion`` to its answer.
It reports p50 / p95 / mean milliseconds per method, tokens per completion, the ratio of each
p50 to ``none``'s, and whether every method gave ``none``'s text (they must: temperature 0).
The typed-ahead cache is off, so every timed request runs the model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

from specdec.bench.results import write_results


def positions(text: str, n: int, rng: random.Random) -> list[int]:
    """Up to ``n`` cursor offsets, each inside a line with at least 8 characters of code after it."""
    spots, start = [], 0
    for line in text.split("\n"):
        body = len(line) - len(line.lstrip())
        if len(line) - body >= 12:
            spots.append(start + rng.randint(body + 2, len(line) - 8))
        start += len(line) + 1
    return sorted(rng.sample(spots, min(n, len(spots))))


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


async def run(args: argparse.Namespace) -> dict:
    from lsprotocol import types as t
    from pygls.lsp.client import LanguageClient

    docs = [
        json.loads(ln)["prompt"] for ln in Path(args.prompts).read_text(encoding="utf-8").splitlines() if ln.strip()
    ]
    docs = docs[: args.limit] if args.limit else docs
    rng = random.Random(args.seed)
    jobs = [(i, off) for i, d in enumerate(docs) for off in positions(d, args.positions, rng)]
    client = LanguageClient("specdec-bench", "0.1")
    stats: list = []
    client.feature("specdec/stats")(lambda params: stats.append(params))
    await client.start_io(sys.executable, "-m", "specdec", "lsp", *args.server_args)
    t0 = time.perf_counter()
    init = await client.initialize_async(
        t.InitializeParams(
            capabilities=t.ClientCapabilities(),
            initialization_options={
                "cache": False,
                "telemetry": True,
                "stop": args.stop,
                "max_new_tokens": args.max_new_tokens,
                "min_confidence": 0,  # every completion is shown: the bench times them and compares them
                "wait_for_model": True,  # start-up is the time until the model is loaded
            },
        )
    )
    startup_s = time.perf_counter() - t0
    client.initialized(t.InitializedParams())
    methods = args.methods
    rows: dict[str, list[dict]] = {m: [] for m in methods}
    version = 0

    def show(uri: str, text: str) -> None:
        nonlocal version
        version += 1
        client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                t.VersionedTextDocumentIdentifier(version=version, uri=uri),
                [t.TextDocumentContentChangeWholeDocument(text)],
            )
        )

    async def ask(uri: str, text: str, below: str) -> tuple[float, str]:
        line, col = text.count("\n"), len(text) - text.rfind("\n") - 1
        show(uri, text + below)
        t1 = time.perf_counter()
        res = await client.text_document_completion_async(
            t.CompletionParams(t.TextDocumentIdentifier(uri), t.Position(line, col))
        )
        ms = 1000 * (time.perf_counter() - t1)
        return ms, (res.items[0].insert_text if res.items else "")

    for i in range(len(docs)):
        client.text_document_did_open(
            t.DidOpenTextDocumentParams(t.TextDocumentItem(f"file:///bench/{i}.py", "python", 0, ""))
        )
    for j, (i, off) in enumerate(_progress(jobs, args.no_progress)):
        uri, prefix = f"file:///bench/{i}.py", docs[i][:off]
        nl = docs[i].find("\n", off)
        below = docs[i][nl:] if args.scenario == "middle" and nl >= 0 else ""
        for m in methods[j % len(methods) :] + methods[: j % len(methods)]:
            if not args.cold:
                _configure(client, t, method=m, max_new_tokens=1)
                await ask(uri, prefix[:-1], below)
            _configure(client, t, method=m, max_new_tokens=args.max_new_tokens)
            ms, text = await ask(uri, prefix, below)
            s = stats[-1] if stats else None
            rows[m].append(
                {
                    "doc": i,
                    "offset": off,
                    "ms": ms,
                    "text": text,
                    "tokens": getattr(s, "tokens", None),
                    "tau": getattr(s, "tau", None),
                }
            )
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return summarise(rows, args, startup_s, bool(init.capabilities.completion_provider))


def _configure(client, t, **settings) -> None:
    client.workspace_did_change_configuration(t.DidChangeConfigurationParams(settings={"specdec": settings}))


def _progress(items: list, off: bool):
    if off:
        return items
    from tqdm import tqdm

    return tqdm(items, desc="positions", file=sys.stderr)


def summarise(rows: dict[str, list[dict]], args: argparse.Namespace, startup_s: float, ok: bool) -> dict:
    base = rows.get("none")
    out = {
        "config": {
            "n_positions": len(next(iter(rows.values()))),
            "stop": args.stop,
            "cold": args.cold,
            "scenario": args.scenario,
            "server_args": args.server_args,
            "max_new_tokens": args.max_new_tokens,
            "prompts": str(args.prompts),
            "seed": args.seed,
            "server_startup_s": startup_s,
            "completion_provider": ok,
        },
        "methods": {},
    }
    for m, rs in rows.items():
        ms = [r["ms"] for r in rs]
        same = sum(r["text"] == b["text"] for r, b in zip(rs, base)) if base else None
        out["methods"][m] = {
            "p50_ms": statistics.median(ms),
            "p95_ms": pct(ms, 0.95),
            "mean_ms": statistics.fmean(ms),
            "tokens_mean": statistics.fmean([r["tokens"] or 0 for r in rs]),
            "identical_to_none": same,
            "n": len(rs),
        }
    if base:
        p50 = out["methods"]["none"]["p50_ms"]
        for m in rows:
            out["methods"][m]["p50_vs_none"] = out["methods"][m]["p50_ms"] / p50
    out["rows"] = rows
    return out


def table(res: dict) -> str:
    lines = [f"{'method':8} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'tokens':>7} {'p50/none':>9} {'same':>7}"]
    for m, r in res["methods"].items():
        lines.append(
            f"{m:8} {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['mean_ms']:8.1f} {r['tokens_mean']:7.1f} "
            f"{r.get('p50_vs_none', float('nan')):9.2f} {r['identical_to_none']}/{r['n']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from specdec.models.loading import ASSETS

    p = argparse.ArgumentParser(
        prog="python -m specdec.bench.lsp_bench",
        description=__doc__.split("\n\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--prompts", type=Path, default=ASSETS / "prompts" / "code.jsonl", help="documents (JSONL, 'prompt')"
    )
    p.add_argument("--limit", type=int, default=0, help="only the first N documents (default: all)")
    p.add_argument("--positions", type=int, default=3, help="cursor positions per document (default 3)")
    p.add_argument(
        "--methods",
        type=lambda s: s.split(","),
        default=["none", "lookup", "draft"],
        help="comma list; none first is the baseline (default none,lookup,draft)",
    )
    p.add_argument("--stop", choices=["line", "block"], default="line")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--cold", action="store_true", help="no untimed request a keystroke earlier")
    p.add_argument(
        "--scenario",
        choices=["append", "middle"],
        default="append",
        help="append: the document ends at the cursor (writing a file top to bottom); middle: the "
        "lines below the cursor's line are there too (editing inside a file)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="write results (with every request) as JSON")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--server-args", type=str.split, default=[], help="extra `specdec lsp` flags, e.g. '--no-draft'")
    args = p.parse_args(argv)
    if not args.prompts.exists():
        print(f"specdec.bench.lsp_bench: error: no such file {args.prompts}", file=sys.stderr)
        return 2
    res = asyncio.run(run(args))
    print(table(res))
    write_results(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
