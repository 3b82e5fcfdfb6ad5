"""Where a completion request's milliseconds go: the typing replay with a timestamp at every stage.

Usage: ``python -m specdec.bench.lsp_profile [--limit N] [--chars C] [--methods none] [--key-ms MS]
[--json OUT] [--server-args ...]``.

Contract: it runs ``specdec.bench.lsp_replay``'s typing (same documents, keys and settings) against a
server started as ``python -m specdec.bench.lsp_profile --serve``: the real ``specdec lsp`` with timing
wrappers around its stages (nothing in the server's code is changed). Both processes read
``time.perf_counter`` (CLOCK_MONOTONIC, one clock for the machine), so client and server stamps
line up. For every completion request the model answered it splits the client's wall time into
stages (``STAGES``): the trip to the server's handler, the prompt build (window, healing split,
tokenization, lookup's corpus), the wait for the model thread, the engine's work before the first
event (healing plan, prefix swap, prefill, healing forward), the decoding steps, the wait for the
consumer to read the last event, the response and the trip back; it prints each stage's median and
mean in ms, and what the model thread spent after the answer was known (steps nobody reads).
Why: the issue asked where the time goes before removing what is not decoding; wrappers measure
the stages of the real server, not a model of it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import runpy
import statistics
import sys
import threading
import time
from pathlib import Path

from specdec import env

ENV = "SPECDEC_LSP_PROFILE"
STAGES = (
    ("to handler", "sent", "handler"),
    ("prompt build", "handler", "submit"),
    ("queue wait", "submit", "serve"),
    ("before 1st event", "serve", "first_push"),
    ("decoding steps", "first_push", "last_push"),
    ("event to reader", "last_push", "last_read"),
    ("reader to response", "last_read", "respond"),
    ("response + trip back", "respond", "received"),
)
DETAIL = ("heal_fit", "before_prefill", "prefill", "heal_step", "prepare")


# -- the server side: timing wrappers around the real server -----------------------------------------
def serve(argv: list[str]) -> int:
    """``specdec lsp`` with every stage stamped; the stamps go to ``$SPECDEC_LSP_PROFILE`` at exit."""
    records: list[dict] = []
    _hook(records)
    # bench sits below the CLI (tests/test_structure.py), so it runs the command's entry, as
    # ``python -m specdec lsp ARGS`` would, with the hooks in this process, rather than importing it
    sys.argv = ["specdec", "lsp", *argv]
    try:
        runpy.run_module("specdec", run_name="__main__", alter_sys=True)
    except SystemExit as done:  # specdec/__main__.py exits with the command's status
        if done.code is None or isinstance(done.code, int):
            return done.code or 0
        raise
    finally:
        path = env.get(ENV)
        if path:
            Path(path).write_text(json.dumps(records), encoding="utf-8")


def _hook(records: list[dict]) -> None:
    from specdec.core import healing
    from specdec.lsp import completer, protocol, server
    from specdec.models import prefixes, target
    from specdec.serving import local

    now = time.perf_counter
    cur: contextvars.ContextVar[dict | None] = contextvars.ContextVar("profile_rec", default=None)
    by_id: dict = {}
    by_handle: dict = {}
    tls = threading.local()

    def wrap(owner, name, before=None, after=None):
        fn = getattr(owner, name)

        def wrapped(*a, **kw):
            t0 = now()
            if before:
                before(t0, *a)
            try:
                return fn(*a, **kw)
            finally:
                if after:
                    after(t0, now(), *a)

        setattr(owner, name, wrapped)

    handle_message = protocol.SpecdecProtocol.handle_message

    def on_message(proto, message):
        if getattr(message, "method", None) != "textDocument/completion":
            return handle_message(proto, message)
        p = message.params
        rec = {"id": message.id, "uri": p.text_document.uri, "line": p.position.line, "col": p.position.character}
        rec["handler"] = now()
        records.append(rec)
        by_id[message.id] = rec
        token = cur.set(rec)  # pygls copies the context into the handler's task
        try:
            return handle_message(proto, message)
        finally:
            cur.reset(token)

    protocol.SpecdecProtocol.handle_message = on_message

    def on_prepare(t0, t1, *a):
        rec = cur.get()
        if rec is not None:
            rec["prepare"] = 1000 * (t1 - t0)

    wrap(completer.Completer, "prepare", after=on_prepare)

    submit = local.LocalBackend.submit

    def on_submit(self, request, **kw):
        rec = cur.get()
        t0 = now()
        handle = submit(self, request, **kw)
        if rec is not None:
            rec["submit"] = t0
            by_handle[id(handle)] = rec
            rec["_handle"] = id(handle)
        return handle

    local.LocalBackend.submit = on_submit

    serve_fn = local.LocalBackend._serve

    def on_serve(self, handle):
        rec = by_handle.get(id(handle))
        tls.rec = rec
        if rec is not None:
            rec["serve"] = now()
            rec["pushes"] = []
        try:
            return serve_fn(self, handle)
        finally:
            if rec is not None:
                rec["serve_end"] = now()
                rec["steps_run"] = handle.steps
            tls.rec = None

    local.LocalBackend._serve = on_serve

    def stage(name):
        def after(t0, t1, *a):
            rec = getattr(tls, "rec", None)
            if rec is not None:
                rec[name] = rec.get(name, 0.0) + 1000 * (t1 - t0)

        return after

    wrap(healing, "fit", after=stage("heal_fit"))
    wrap(healing, "finish", after=stage("heal_step"))
    wrap(prefixes, "before_prefill", after=stage("before_prefill"))
    wrap(target.Target, "prefill", after=stage("prefill"))

    from specdec.serving import backend

    push = backend.Handle._push
    take = backend.Handle._take

    def on_push(self, event):
        rec = by_handle.get(id(self))
        if rec is not None:
            rec["pushes"].append(now())
            rec.setdefault("step_ms", []).append(sum(event.timings_ms.values()) if event.timings_ms else None)
        return push(self, event)

    def on_take(self):
        rec = by_handle.get(id(self))
        if rec is not None:
            rec.setdefault("reads", []).append(now())
        return take(self)

    backend.Handle._push, backend.Handle._take = on_push, on_take

    def on_cancel(t0, self, handle, reason="cancelled"):
        rec = by_handle.get(id(handle))
        if rec is not None and "cancel" not in rec:
            rec["cancel"], rec["cancel_reason"] = t0, reason

    wrap(local.LocalBackend, "cancel", on_cancel)

    def on_response(t0, t1, proto, msg_id, *a, **kw):
        rec = by_id.pop(msg_id, None)
        if rec is not None:
            rec["respond"], rec["responded"] = t0, t1

    wrap(server.SpecdecProtocol, "_send_response", after=on_response)


# -- the client side: the replay, and the breakdown --------------------------------------------------
def method_of(uri: str) -> str:
    """The method in a replay document's uri (``file:///replay/DOC-METHOD-FILTER.py``)."""
    return uri.rsplit("/", 1)[-1].split("-")[1]


def breakdown(server: list[dict], client: list[dict]) -> dict:
    """Per method, per stage (``STAGES``) the median and mean ms over the requests the model answered."""
    out = {}
    for m in sorted({method_of(r["uri"]) for r in server}):
        out[m] = _breakdown([r for r in server if method_of(r["uri"]) == m], client)
    return out


def _breakdown(server: list[dict], client: list[dict]) -> dict:
    sent = {(c["uri"], c["line"], c["col"]): c for c in client}
    rows = []
    for rec in server:
        c = sent.get((rec["uri"], rec["line"], rec["col"]))
        if c is None or not c.get("answered") or "pushes" not in rec or not rec["pushes"] or "respond" not in rec:
            continue
        reads = rec.get("reads") or [rec["pushes"][-1]]
        n_read = len(reads) - (1 if rec.get("steps_run", 0) < len(reads) else 0)
        stamps = dict(rec, sent=c["sent"], received=c["received"], first_push=rec["pushes"][0])
        # the last event the reader used: the one read last before the response
        used = [r for r in reads if r <= rec["respond"]]
        stamps["last_read"] = used[-1] if used else reads[-1]
        pushed = [p for p in rec["pushes"] if p <= stamps["last_read"]]
        stamps["last_push"] = pushed[-1] if pushed else rec["pushes"][0]
        row = {name: 1000 * (stamps[b] - stamps[a]) for name, a, b in STAGES}
        row["total"] = 1000 * (c["received"] - c["sent"])
        row["steps_used"] = len(pushed)
        row["steps_run"] = rec.get("steps_run")
        row["after_answer_ms"] = 1000 * max(0.0, rec.get("serve_end", rec["respond"]) - rec["respond"])
        row["reads"] = n_read
        row["step_ms"] = rec.get("step_ms")
        steps = [x for x in (rec.get("step_ms") or [])[1 : len(pushed)] if x is not None]
        row["engine ms/step"] = statistics.fmean(steps) if steps else None
        row["wall ms/step"] = row["decoding steps"] / (len(pushed) - 1) if len(pushed) > 1 else None
        for k in DETAIL:
            row[k] = rec.get(k, 0.0)
        rows.append(row)
    out: dict = {"n": len(rows), "stages": {}}
    extra = ["after_answer_ms", "steps_used", "steps_run", "engine ms/step", "wall ms/step"]
    for key in [s[0] for s in STAGES] + ["total", *DETAIL, *extra]:
        vals = [r[key] for r in rows if r.get(key) is not None]
        if vals:
            out["stages"][key] = {"p50": statistics.median(vals), "mean": statistics.fmean(vals)}
    out["rows"] = rows
    return out


def table(res: dict) -> str:
    methods = list(res["methods"])
    lines = [f"{'stage (p50 / mean ms)':22} " + " ".join(f"{m:>15}" for m in methods)]
    lines.append(f"{'requests':22} " + " ".join(f"{res['methods'][m]['n']:>15}" for m in methods))
    names = [n for m in methods for n in res["methods"][m]["stages"]]
    for name in dict.fromkeys(names):
        cells = []
        for m in methods:
            v = res["methods"][m]["stages"].get(name)
            cells.append(f"{v['p50']:7.1f} /{v['mean']:6.1f}" if v else f"{'-':>15}")
        lines.append(f"{name:22} " + " ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        return serve(argv[1:])
    from specdec.bench import lsp_replay
    from specdec.bench.results import write_results

    p = argparse.ArgumentParser(prog="python -m specdec.bench.lsp_profile", description=__doc__.split("\n\n")[2])
    lsp_replay.add_arguments(p, methods="none")
    args = p.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "server.json"
        os.environ[ENV] = str(path)
        trace: list[dict] = []
        args.server_command = [sys.executable, "-m", "specdec.bench.lsp_profile", "--serve"]
        asyncio.run(lsp_replay.run(args, trace))
        for _ in range(100):  # the server writes its stamps as it exits
            if path.exists():
                break
            time.sleep(0.05)
        server = json.loads(path.read_text(encoding="utf-8"))
    res = {"config": {k: str(v) for k, v in vars(args).items()}, "methods": breakdown(server, trace)}
    print(table(res))
    if args.json:
        write_results(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
