"""What the quiet filters remove on the held-out typing replay, and what they cost in accepted characters.

Usage: ``python -m experiments.lsp_quiet [--limit N] [--chars C] [--stop line|block]
[--confidence 0,0.2,0.3] [--repeat 3,0] [--json OUT]``.

Contract: the documents and keys of ``specdec.bench.lsp_replay`` (the shipped held-out prompts, the last
``--chars`` characters of each typed one key at a time), without the clock: at every text the
typist can reach, the server's completer (``specdec.lsp.completer``, in process, on the in-process
backend, greedy, method ``none``: every method gives the same text) computes the suggestion once,
with its repetition verdict and its confidence (``specdec.lsp.quiet``). Then, for every filter setting
(``repeat_limit`` x ``min_confidence``), a typist walks the keys: a suggestion the setting keeps
is shown; one that is exactly what is typed next is accepted (inserted; typing goes on after it).
Per setting it reports the suggestions shown, the ones the filter held back (``removed``), how
many of those would have been accepted (``removed_accepted``) and the accepted characters (their
share of the typed ones). Suggestions are the same for every setting, so the differences are the
filters' alone (the clocked replay's differences also move with which answers beat the next key).
They are computed with the server's early stop off (the job's ``repeat_limit`` 0), so each is the
whole completion; for every ``repeat_limit`` r > 0, a row ``... early`` repeats the walk with the
suggestions the server really answers with, where ``specdec.lsp.quiet.EarlyJunk`` may stop a completion
whose text so far is already junk (computed once more, with the job's ``repeat_limit`` r).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from specdec.bench.results import write_results


def _floats(s: str) -> list[float]:
    return [float(x) for x in s.split(",")]


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",")]


class Suggestor:
    """The suggestion at a text, computed once (the completer, greedy, so it is deterministic)."""

    def __init__(self, completer, opts) -> None:
        self.completer, self.opts, self.memo = completer, opts, {}

    async def at(self, prefix: str) -> dict:
        """The suggestion at ``prefix``; the completer's early stop follows ``self.opts.repeat_limit``."""
        from specdec.lsp.quiet import confidence, repetitive

        got = self.memo.get(prefix)
        if got is None:
            job = self.completer.prepare(prefix, "", [], self.opts)
            out = await self.completer.run(job, lambda: False)
            text = out.text or ""
            got = self.memo[prefix] = {
                "text": text,
                "repetitive": {r: repetitive(text, r) for r in range(2, 17)},
                "confidence": confidence(out.spans, len(text)),
            }
        return got


def kept(s: dict, repeat: int, min_conf: float) -> bool:
    if not s["text"].strip():
        return False
    if repeat and s["repetitive"][repeat]:
        return False
    c = s["confidence"]
    return not (min_conf > 0 and c is not None and c < min_conf)


async def walk(sug: Suggestor, start: str, typed: str, repeat: int, min_conf: float) -> dict:
    row = {"keys": 0, "shown": 0, "removed": 0, "removed_accepted": 0, "accepted_chars": 0, "chars": len(typed)}
    text, i = start, 0
    while i < len(typed):
        text += typed[i]
        i += 1
        row["keys"] += 1
        s = await sug.at(text)
        would = bool(s["text"].strip()) and typed.startswith(s["text"], i)
        if not kept(s, repeat, min_conf):
            if s["text"].strip():
                row["removed"] += 1
                row["removed_accepted"] += would
            continue
        row["shown"] += 1
        if would:
            text += s["text"]
            i += len(s["text"])
            row["accepted_chars"] += len(s["text"])
    return row


async def run(args: argparse.Namespace) -> dict:
    from specdec.engine.session import Engine
    from specdec.lsp.completer import Completer
    from specdec.lsp.completion import Options
    from specdec.serving.local import LocalBackend

    docs = [json.loads(ln)["prompt"] for ln in Path(args.prompts).read_text(encoding="utf-8").splitlines() if ln]
    docs = docs[: args.limit] if args.limit else docs
    backend = LocalBackend(Engine.load(calibration="auto"))
    try:
        completer = Completer(backend)

        def suggestor(early: int) -> Suggestor:
            opts = Options(method="none", stop=args.stop, max_new_tokens=args.max_new_tokens, repeat_limit=early)
            return Suggestor(completer, opts)

        sug = suggestor(0)  # whole completions: the filters judge the finished text
        out: dict = {"config": {k: str(v) for k, v in vars(args).items()}, "settings": {}}
        for r in args.repeat:
            runs = [("", sug)] + ([(" early", suggestor(r))] if r > 0 else [])
            for tag, source in runs:
                for c in args.confidence:
                    rows = [await walk(source, d[: len(d) - args.chars], d[len(d) - args.chars :], r, c) for d in docs]
                    total = {k: sum(row[k] for row in rows) for k in rows[0]}
                    total["accepted_share"] = total["accepted_chars"] / total["chars"] if total["chars"] else 0.0
                    out["settings"][f"repeat_limit={r}{tag} min_confidence={c}"] = total
                    print(f"repeat_limit={r}{tag} min_confidence={c}: {total}", file=sys.stderr)
        out["suggestions"] = [
            {"tail": p[-40:], "text": s["text"], "confidence": s["confidence"], "repetitive3": s["repetitive"][3]}
            for p, s in sug.memo.items()
        ]
        return out
    finally:
        backend.shutdown(10)


def table(res: dict) -> str:
    lines = [f"{'setting':36} {'keys':>5} {'shown':>6} {'removed':>8} {'rem.acc':>8} {'acc ch':>7} {'acc %':>6}"]
    for name, r in res["settings"].items():
        lines.append(
            f"{name:36} {r['keys']:5d} {r['shown']:6d} {r['removed']:8d} {r['removed_accepted']:8d} "
            f"{r['accepted_chars']:7d} {r['accepted_share']:6.1%}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from specdec.models.loading import ASSETS

    p = argparse.ArgumentParser(prog="python -m experiments.lsp_quiet", description=__doc__.split("\n\n")[2])
    p.add_argument("--prompts", type=Path, default=ASSETS / "prompts" / "code.jsonl")
    p.add_argument("--limit", type=int, default=4, help="documents (default 4, as the replay in docs/lsp.md)")
    p.add_argument("--chars", type=int, default=80, help="characters typed per document (default 80)")
    p.add_argument("--stop", choices=["line", "block"], default="line")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--confidence", type=_floats, default=[0.0, 0.1, 0.2, 0.3, 0.4], help="min_confidence values")
    p.add_argument("--repeat", type=_ints, default=[3, 0], help="repeat_limit values")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    res = asyncio.run(run(args))
    print(table(res))
    write_results(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
