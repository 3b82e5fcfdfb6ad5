"""``specdec bench --backend URL``: our embedded engine and a remote server side by side.

Contract: ``main(args)`` runs, on the same prompts at temperature 0, interleaved prompt by prompt
(the order rotates): ``ours:none`` and ``ours:METHOD`` (the embedded engine, one request at a
time, k as ``--k`` or auto), ``remote:METHOD`` (``specdec/serving/remote.py``: the Backend seam over
streaming /v1/completions, one client) and ``raw:METHOD`` (the same request read by a bare
streaming HTTP client: the reference for the remote backend's own overhead); then
``remote:METHOD@cN`` with N = ``--concurrency`` clients at once. METHOD is what the server runs
(a vLLM server from ``specdec vllm serve`` says so in its model list) or ``--methods``' first
non-none entry for our own server. Columns: tok/s median and aggregate, tau, alpha per position,
identical (tokens equal to ``ours:none``). ``--json OUT`` writes the rows. Speed is measured,
never asserted; where the machine is shared, say so with the figures.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field

from specdec.bench.closed_loop import closed_loop
from specdec.core.config import GenerateSpec
from specdec.core.events import Stats
from specdec.serving.backend import Request


@dataclass
class Row:
    name: str
    seconds: list[float] = field(default_factory=list)
    tokens: list[list[int]] = field(default_factory=list)
    stats: list[Stats] = field(default_factory=list)
    wall_s: float | None = None  # concurrent rows: the whole batch's wall time

    def summary(self, baseline: list[list[int]]) -> dict:
        total = Stats.total(self.stats) if self.stats else Stats()
        n_tok = sum(len(t) for t in self.tokens)
        rates = [len(t) / s for t, s in zip(self.tokens, self.seconds) if s > 0]
        return {
            "name": self.name,
            "tok_s_median": statistics.median(rates) if rates else None,
            "tok_s_agg": n_tok / (self.wall_s or sum(self.seconds) or 1e-9),
            "tau": total.tau,
            "alpha_per_position": total.alpha_per_position[:4],
            "identical": sum(a == b for a, b in zip(self.tokens, baseline)),
            "prompts": len(self.tokens),
        }


def _raw(url: str, ids: list[int], n: int, token: str | None) -> list[int]:
    body = {"model": "specdec", "prompt": ids, "max_tokens": n, "temperature": 0, "stream": True}
    body["return_token_ids"] = True
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    out: list[int] = []
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), headers)
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            if line.startswith(b"data: {"):
                for c in json.loads(line[6:])["choices"]:
                    out += c.get("token_ids") or []
    return out


def _timed(fn):
    t0 = time.perf_counter()
    tokens, stats = fn()
    return time.perf_counter() - t0, tokens, stats


def _remote_one(remote, ids, spec):
    events = list(remote.submit(Request(ids, spec)))
    return [t for ev in events for t in ev.token_ids], (events[-1].stats if events else Stats())


def run(engine, remote, prompts: list[str], method: str, n: int, concurrency: int, k, token=None) -> list[Row]:
    ids_list = [remote.encode(p) for p in prompts]
    local_spec = GenerateSpec(method=method, k=k, max_new_tokens=n)
    remote_spec = GenerateSpec(method=method, max_new_tokens=n)
    jobs = {
        "ours:none": lambda ids: _gen(engine, ids, GenerateSpec(method="none", max_new_tokens=n)),
        f"ours:{method}": lambda ids: _gen(engine, ids, local_spec),
        f"remote:{method}": lambda ids: _remote_one(remote, ids, remote_spec),
        f"raw:{method}": lambda ids: (_raw(remote.url, ids, n, token), Stats()),
    }  # for method none, "ours:none" appears once
    rows = {name: Row(name) for name in jobs}
    for ids in ids_list[:2]:  # warm-up, untimed
        for job in jobs.values():
            job(ids)
    names = list(jobs)
    for i, ids in enumerate(ids_list):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            s, toks, st = _timed(lambda name=name, ids=ids: jobs[name](ids))
            rows[name].seconds.append(s)
            rows[name].tokens.append(toks)
            rows[name].stats.append(st)
        print(f"bench --backend: prompt {i + 1}/{len(ids_list)}", file=sys.stderr)
    rows[f"remote:{method}@c{concurrency}"] = _concurrent(remote, ids_list, remote_spec, concurrency)
    return list(rows.values())


def _gen(engine, ids, spec):
    res = engine.generate(ids, spec)
    return res.tokens, res.stats


def _concurrent(remote, ids_list, spec, concurrency: int) -> Row:
    row = Row(f"remote:{spec.method}@c{concurrency}")
    out: list = [None] * len(ids_list)

    def job(i: int) -> None:
        out[i] = _timed(lambda: _remote_one(remote, ids_list[i], spec))

    row.wall_s = closed_loop(len(ids_list), concurrency, job)
    for s, toks, st in out:
        row.seconds.append(s)
        row.tokens.append(toks)
        row.stats.append(st)
    return row


def main(args) -> int:
    from specdec.bench.prompts import load_items
    from specdec.engine.load import engine_from_args as load_engine
    from specdec.serving.remote import backend_for

    items = load_items(args.prompts, args.limit, 0, getattr(args, "categories", None))
    remote = backend_for(args, None)
    wanted = [m for m in (args.methods or []) if m != "none"]
    method = remote.methods[0] if remote.kind == "vllm" else (wanted[0] if wanted else "draft")
    engine = load_engine(args)
    prompts = [it.text(engine.tokenizer) for it in items]  # the same model's chat template on both sides
    k = args.k[0] if args.k else "auto"
    rows = run(engine, remote, prompts, method, args.max_new_tokens, max(args.concurrency or [8]), k, remote.token)
    base = rows[0].tokens
    table = [r.summary(base) for r in rows]
    ref = table[0]["tok_s_agg"]
    print(f"{'row':<22}{'tok/s med':>10}{'tok/s agg':>10}{'x none':>8}{'tau':>6}  alpha_1..4             identical")
    for r in table:
        alphas = " ".join(f"{a:.2f}" if a is not None else "  - " for a in r["alpha_per_position"])
        tau = f"{r['tau']:.2f}" if r["tau"] else "  - "
        med = f"{r['tok_s_median']:.1f}" if r["tok_s_median"] else "-"
        print(
            f"{r['name']:<22}{med:>10}{r['tok_s_agg']:>10.1f}{r['tok_s_agg'] / ref:>8.2f}{tau:>6}  "
            f"{alphas:<22} {r['identical']}/{r['prompts']}"
        )
    by = {r["name"]: r for r in table}
    raw, rem = by[f"raw:{method}"]["tok_s_agg"], by[f"remote:{method}"]["tok_s_agg"]
    print(f"remote backend overhead over a bare streaming client: {100 * (raw / rem - 1):+.1f}%")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"backend": remote.url, "kind": remote.kind, "method": method, "rows": table}
        payload["raw"] = [asdict(r) | {"stats": [s.to_dict() for s in r.stats]} for r in rows]
        args.json.write_text(json.dumps(payload, indent=1) + "\n")
    remote.shutdown(10)
    return 0
