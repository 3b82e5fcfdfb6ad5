"""Typing replay of `specdec lsp`: a held-out file typed key by key through a real LSP client.

Usage: ``python -m specdec.bench.lsp_replay [--limit N] [--chars C] [--methods none,lookup,draft]
[--key-ms MS] [--stop line|block] [--filters 3,0] [--confidence 0,0.2] [--json OUT]``.

Contract: it starts ``python -m specdec lsp`` and drives it with pygls' language client. For each
document (the shipped prompts, cut from files no model trained on), the editor holds all but its
last ``--chars`` characters, and a typist types those one key at a time, a key every ``--key-ms``
milliseconds: after each key a ``didChange`` and a ``textDocument/completion`` request (as an
editor with completion on every key does). An answer that arrives before the next key is *shown*;
if a shown suggestion is exactly what the typist is about to type, the typist accepts it (the
editor inserts it) and goes on after it. An answer that arrives later is superseded by the next key
(the server answers it empty). Per method (and per ``--filters``: the repetition filter's
``repeat_limit``; ``--confidence``: ``min_confidence``), it reports latency percentiles of the
requests that got an answer (typed-ahead cache hits included; ``model_p50_ms``/``model_p95_ms``:
those the model answered, by the server's clock), cache hits, superseded requests with their time
until superseded (the client's clock, from sending to the empty answer that came back after a newer
request went out; they never got a suggestion, so they are not in the answered percentiles), empty
answers that came back in time (``empty_*``: filtered, or nothing but whitespace),
``all_p50_ms``/``all_p95_ms`` over all three (a superseded request at its time until superseded, a
lower bound on what it would have taken), the share of keys with a suggestion shown, the
suggestions the filter held back, and the characters accepted (their share of the characters to
type).
Methods run one document at a time in rotating order, so load changes hit all of them alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from specdec.bench.lsp_bench import pct
from specdec.bench.results import write_results


async def replay(
    client, t, uri: str, start: str, typed: str, key_s: float, stats: list, trace: list | None = None
) -> dict:
    """One document typed key by key; ``trace`` (if given) gets each request's uri, position and
    client-side send and receive times (``specdec.bench.lsp_profile`` lines them up with the server's)."""
    version = [0]
    text = start

    def show(new: str) -> None:
        version[0] += 1
        client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                t.VersionedTextDocumentIdentifier(version=version[0], uri=uri),
                [t.TextDocumentContentChangeWholeDocument(new)],
            )
        )

    client.text_document_did_open(t.DidOpenTextDocumentParams(t.TextDocumentItem(uri, "python", 0, start)))
    row = {"keys": 0, "shown": 0, "accepted_chars": 0, "late": 0, "chars": len(typed)}
    row.update(ms=[], empty_ms=[], superseded_ms=[])
    latest = [0.0]  # when the newest request was sent
    n_stats = len(stats)
    i = 0
    while i < len(typed):
        text += typed[i]
        i += 1
        row["keys"] += 1
        show(text)
        line, col = text.count("\n"), len(text) - text.rfind("\n") - 1
        t0 = latest[0] = time.perf_counter()
        fut = asyncio.ensure_future(
            client.text_document_completion_async(
                t.CompletionParams(t.TextDocumentIdentifier(uri), t.Position(line, col))
            )
        )
        sent = {"uri": uri, "line": line, "col": col, "sent": t0}
        if trace is not None:
            trace.append(sent)
        fut.add_done_callback(lambda f, t0=t0, sent=sent: _timed(row, f, t0, sent, latest[0] > t0))
        done, _ = await asyncio.wait([fut], timeout=key_s)
        if not done:
            row["late"] += 1
            continue
        res = fut.result()
        got = res.items[0].insert_text if res.items else ""
        if got.strip():
            row["shown"] += 1
            if typed.startswith(got, i):
                text += got
                i += len(got)
                row["accepted_chars"] += len(got)
                show(text)
        await asyncio.sleep(max(0.0, key_s - (time.perf_counter() - t0)))
    await asyncio.sleep(0.5)  # the last late answers
    mine = [s for s in stats[n_stats:] if s.uri == uri]
    row["cache"] = sum(s.source == "cache" for s in mine)
    row["superseded"] = sum(s.outcome == "superseded" for s in mine)
    row["filtered"] = sum(s.outcome == "filtered" for s in mine)
    row["model"] = sum(s.source == "model" and s.outcome == "done" for s in mine)
    row["model_ms"] = [s.ms for s in mine if s.source == "model" and s.outcome == "done"]
    client.text_document_did_close(t.DidCloseTextDocumentParams(t.TextDocumentIdentifier(uri)))
    return row


def _timed(row: dict, fut, t0: float, sent: dict, newer: bool) -> None:
    """Latency of a request that got an answer (``ms``). An empty answer marked incomplete is
    either a superseded request (``newer``: a newer request for the document went out before it
    came back; its time until then goes to ``superseded_ms``: how long it ran, not how long
    decoding would have taken; a blank answer that was also late lands here too, the client cannot
    tell them apart) or one answered in time with nothing to show (filtered, or only whitespace:
    ``empty_ms``)."""
    sent["received"] = t1 = time.perf_counter()
    if fut.cancelled() or fut.exception() is not None:
        return
    res = fut.result()
    if res.items or not res.is_incomplete:
        sent["answered"] = True
        row["ms"].append(1000 * (t1 - t0))
    else:
        row["superseded_ms" if newer else "empty_ms"].append(1000 * (t1 - t0))


async def run(args: argparse.Namespace, trace: list | None = None) -> dict:
    from lsprotocol import types as t
    from pygls.lsp.client import LanguageClient

    docs = [json.loads(ln)["prompt"] for ln in Path(args.prompts).read_text(encoding="utf-8").splitlines() if ln]
    docs = docs[: args.limit] if args.limit else docs
    client = LanguageClient("specdec-replay", "0.1")
    stats: list = []
    client.feature("specdec/stats")(lambda params: stats.append(params))
    client.feature("window/showMessage")(lambda params: print("server:", params.message, file=sys.stderr))
    command = getattr(args, "server_command", None) or [sys.executable, "-m", "specdec", "lsp"]
    await client.start_io(*command, *args.server_args)
    await client.initialize_async(
        t.InitializeParams(
            capabilities=t.ClientCapabilities(),
            initialization_options={
                "telemetry": True,
                "stop": args.stop,
                "max_new_tokens": args.max_new_tokens,
                "wait_for_model": True,  # typing starts once the model is loaded
            },
        )
    )
    client.initialized(t.InitializedParams())
    confs = getattr(args, "confidence", None) or [None]
    configs = [(m, f, c) for m in args.methods for f in args.filters for c in confs]
    rows: dict[str, list[dict]] = {_name(*mfc): [] for mfc in configs}
    for d, doc in enumerate(docs):
        cut = len(doc) - args.chars
        for j in range(len(configs)):
            m, f, c = configs[(d + j) % len(configs)]
            settings = {"method": m, "repeat_limit": f, "cache": True} | ({} if c is None else {"min_confidence": c})
            client.workspace_did_change_configuration(t.DidChangeConfigurationParams(settings={"specdec": settings}))
            uri = f"file:///replay/{d}-{m}-{f}-{c}.py"
            rows[_name(m, f, c)].append(
                await replay(client, t, uri, doc[:cut], doc[cut:], args.key_ms / 1000, stats, trace)
            )
        print(f"document {d + 1}/{len(docs)}", file=sys.stderr)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return summarise(rows, args)


def _name(method: str, repeat_limit: int, min_confidence: float | None) -> str:
    tail = "" if min_confidence is None else f" min_confidence={min_confidence}"
    return f"{method} repeat_limit={repeat_limit}{tail}"


def summarise(rows: dict[str, list[dict]], args: argparse.Namespace) -> dict:
    out = {"config": {k: str(v) for k, v in vars(args).items()}, "methods": {}}
    for name, rs in rows.items():
        ms, model, sup, empty = ([x for r in rs for x in r[k]] for k in ("ms", "model_ms", "superseded_ms", "empty_ms"))
        total = {k: sum(r[k] for r in rs) for k in rs[0] if not isinstance(rs[0][k], list)}
        out["methods"][name] = {
            **_pcts("", ms),
            **_pcts("model_", model),
            **_pcts("superseded_", sup),
            **_pcts("empty_", empty),
            **_pcts("all_", ms + empty + sup),
            "superseded_answers": len(sup),
            "empty_answers": len(empty),
            **total,
            "shown_share": total["shown"] / total["keys"] if total["keys"] else 0.0,
            "accepted_share": total["accepted_chars"] / total["chars"] if total["chars"] else 0.0,
        }
    out["rows"] = rows
    return out


def _pcts(prefix: str, ms: list[float]) -> dict:
    return {f"{prefix}p50_ms": statistics.median(ms) if ms else None, f"{prefix}p95_ms": pct(ms, 0.95) if ms else None}


def table(res: dict) -> str:
    head = f"{'config':24} {'p50':>6} {'p95':>6} {'keys':>5} {'shown':>6} {'late':>5} {'cache':>5} "
    head += f"{'super':>5} {'sup50':>6} {'all95':>6} {'mod50':>6} {'filt':>5} {'acc ch':>7} {'acc %':>6}"
    lines = [head]
    for name, r in res["methods"].items():
        lines.append(
            f"{name:24} {r['p50_ms'] or 0:6.0f} {r['p95_ms'] or 0:6.0f} {r['keys']:5d} {r['shown_share']:6.0%} "
            f"{r['late']:5d} {r['cache']:5d} {r['superseded']:5d} {r['superseded_p50_ms'] or 0:6.0f} "
            f"{r['all_p95_ms'] or 0:6.0f} {r['model_p50_ms'] or 0:6.0f} {r['filtered']:5d} "
            f"{r['accepted_chars']:7d} {r['accepted_share']:6.1%}"
        )
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser, methods: str = "none,lookup,draft") -> None:
    """The replay's flags (``specdec.bench.lsp_profile`` types the same way)."""
    from specdec.models.loading import ASSETS

    p.add_argument("--prompts", type=Path, default=ASSETS / "prompts" / "code.jsonl")
    p.add_argument("--limit", type=int, default=5, help="documents (default 5)")
    p.add_argument("--chars", type=int, default=120, help="characters typed per document (default 120)")
    p.add_argument("--key-ms", type=float, default=150.0, help="milliseconds between keys (default 150)")
    p.add_argument("--methods", type=lambda s: s.split(","), default=methods.split(","))
    p.add_argument("--filters", type=lambda s: [int(x) for x in s.split(",")], default=[3], help="repeat_limit values")
    p.add_argument(
        "--confidence",
        type=lambda s: [float(x) for x in s.split(",")],
        default=None,
        help="min_confidence values (default: the server's)",
    )
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--stop", choices=["line", "block"], default="line")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--server-args", type=str.split, default=[])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec.bench.lsp_replay", description=__doc__.split("\n\n")[2])
    add_arguments(p)
    args = p.parse_args(argv)
    res = asyncio.run(run(args))
    print(table(res))
    write_results(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
