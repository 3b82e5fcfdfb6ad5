"""llama.cpp's rows for ``specdec bench --compare-llamacpp``: the same prompts through ``llama-server``.

Contract: ``llamacpp_rows(gguf, threads, ids, base, max_new, ...)`` runs, after our rows and one
server at a time, each row of ``ROWS`` (``llamacpp`` plain, ``llamacpp-ngram-simple``,
``llamacpp-ngram-mod``; ``llamacpp-draft`` only with a draft GGUF) through ``llama-server``
(specdec/bench/llamacpp_build.py builds it once) started on the engine's own GGUF file with
``-t/-tb threads -c 4096 -np 1`` on a free loopback port. Each server first gets two untimed
requests, then every prompt, as our token ids (``/completion`` with ``prompt: [ids]``), greedy
(``temperature 0, top_k 1``), ``n_predict = max_new`` and EOS honoured as ours is, without
llama-server's prompt cache (ours prefills every request). A request is timed with a wall clock
around the whole HTTP call, prefill included: the quantity of our rows (specdec/bench/metrics.py).
It returns ``{row: (runs, extra)}`` with ``runs[prompt]`` = one ``(tokens, seconds, None)`` per
repeat, the shape run_bench's figures take, and ``extra`` = ``argv`` (the server's flags),
``drafted``/``accepted`` (llama.cpp's ``timings.draft_n``/``draft_n_accepted`` summed) and
``alpha``. ``agreement(runs, base)`` compares each prompt's tokens with our ``none`` row's:
``identical`` prompts and ``mean_common_prefix`` (tokens equal from the start, averaged).
``tokenize_agrees`` counts prompts whose text llama-server tokenizes into our ids (same vocab).

Why a peer: llama.cpp is what a user would run on this CPU instead. Why agreement, not
exactness: llama.cpp computes on the 4-bit weights with 8-bit activations, our engine on the
dequantized weights in floating point, so greedy paths may part where two logits are close.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from specdec.bench.vllm_rows import free_port

ROWS = {
    "llamacpp": [],
    "llamacpp-ngram-simple": ["--spec-type", "ngram-simple"],
    "llamacpp-ngram-mod": ["--spec-type", "ngram-mod"],
}
CONTEXT = 4096


class LlamaCppError(RuntimeError):
    """llama-server could not run these rows (no GGUF, it died, it never became ready)."""


def server_argv(exe: Path, gguf: Path, threads: int, port: int, extra: list[str] | None = None) -> list[str]:
    argv = [str(exe), "-m", str(gguf), "-t", str(threads), "-tb", str(threads), "-c", str(CONTEXT), "-np", "1"]
    return argv + ["--host", "127.0.0.1", "--port", str(port), "--no-webui"] + list(extra or [])


def request_body(ids: list[int], max_new: int, ignore_eos: bool = False) -> dict:
    return {
        "prompt": list(ids),
        "n_predict": max_new,
        "temperature": 0.0,
        "top_k": 1,
        "ignore_eos": ignore_eos,
        "cache_prompt": False,
        "return_tokens": True,
        "stream": False,
        "seed": 0,
    }


def post_json(url: str, body: dict, timeout: float = 600.0) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class LlamaServer:
    """One llama-server process; ``url`` answers once ``start()`` returned."""

    def __init__(self, argv: list[str], log_path: Path, port: int) -> None:
        self.argv, self.log_path, self.url = argv, Path(log_path), f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120.0) -> str:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LlamaCppError(f"llama-server exited with status {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return self.url
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise LlamaCppError(f"llama-server was not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def complete(url: str, ids: list[int], max_new: int, ignore_eos: bool = False) -> tuple[list[int], float, dict]:
    """Greedy tokens of one request, its wall seconds (prefill included) and llama.cpp's timings."""
    t0 = time.perf_counter()
    out = post_json(url + "/completion", request_body(ids, max_new, ignore_eos))
    dt = time.perf_counter() - t0
    return [int(t) for t in out.get("tokens") or []], dt, out.get("timings") or {}


def tokenize_agrees(url: str, texts: list[str], ids: list[list[int]]) -> int:
    """Prompts whose text llama-server tokenizes into our ids (with or without its BOS)."""
    n = 0
    for text, want in zip(texts, ids):
        got = [post_json(url + "/tokenize", {"content": text, "add_special": s})["tokens"] for s in (False, True)]
        n += list(want) in got
    return n


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def agreement(runs: list[list], base: list[list[int]]) -> dict:
    """Prompts whose tokens equal ``base``'s (every repeat), and the mean common-prefix length."""
    prefixes = [common_prefix(reps[0][0], b) for reps, b in zip(runs, base)]
    return {
        "identical": sum(all(t == b for t, _, _ in reps) for reps, b in zip(runs, base)),
        "mean_common_prefix": sum(prefixes) / len(prefixes) if prefixes else None,
        "mean_base_len": sum(len(b) for b in base) / len(base) if base else None,
    }


def draft_counters(timings: list[dict]) -> dict:
    drafted = sum(t.get("draft_n", 0) for t in timings)
    accepted = sum(t.get("draft_n_accepted", 0) for t in timings)
    return {"drafted": drafted, "accepted": accepted, "alpha": accepted / drafted if drafted else None}


def run_row(url: str, ids: list[list[int]], max_new: int, repeats: int = 1, warmup: int = 2) -> tuple[list, dict]:
    """Warm-up requests (untimed), then every prompt ``repeats`` times: (runs, draft counters)."""
    for w in range(warmup):
        complete(url, ids[w % len(ids)], max_new)
    runs, timings = [], []
    for x in ids:
        reps = []
        for _ in range(repeats):
            tokens, dt, tm = complete(url, x, max_new)
            reps.append((tokens, dt, None))
            timings.append(tm)
        runs.append(reps)
    return runs, draft_counters(timings)


def row_flags(draft_gguf: Path | None, threads: int) -> dict[str, list[str]]:
    rows = dict(ROWS)
    if draft_gguf is not None:
        rows["llamacpp-draft"] = ["--spec-type", "draft-simple", "-md", str(draft_gguf), "-td", str(threads)]
    return rows


def llamacpp_rows(
    gguf: Path,
    threads: int,
    ids: list[list[int]],
    max_new: int,
    texts: list[str] | None = None,
    repeats: int = 1,
    draft_gguf: Path | None = None,
    log_dir: Path | None = None,
    exe: Path | None = None,
) -> tuple[dict[str, tuple[list, dict]], dict]:
    """Every llama.cpp row, one server at a time: ``({row: (runs, extra)}, config)``."""
    from specdec.bench.llamacpp_build import server_binary

    exe = exe or server_binary()
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="specdec-llamacpp-"))
    rows: dict[str, tuple[list, dict]] = {}
    config = {"server": str(exe), "gguf": str(gguf), "threads": threads, "context": CONTEXT}
    for name, flags in row_flags(draft_gguf, threads).items():
        port = free_port()
        argv = server_argv(exe, gguf, threads, port, flags)
        print(f"llama.cpp row {name}: {' '.join(argv[1:])}", file=sys.stderr, flush=True)
        with LlamaServer(argv, log_dir / f"llama-server-{name}.log", port) as server:
            if texts is not None and "tokenize_agrees" not in config:
                config["tokenize_agrees"] = tokenize_agrees(server.url, texts, ids)
            runs, counters = run_row(server.url, ids, max_new, repeats)
        rows[name] = (runs, {"argv": argv[1:], **counters})
    return rows, config


def figures(lc_rows: dict, runs_none: list[list], base: list[list[int]]) -> dict[str, dict]:
    """Each llama.cpp row's figures, defined as our rows' (throughput), with its agreement."""
    from specdec.bench.metrics import throughput

    return {
        name: {**throughput(r, runs_none, base), **extra, **agreement(r, base)} for name, (r, extra) in lc_rows.items()
    }


def engine_gguf(engine, target: Path | str | None = None) -> Path:
    """The GGUF file the engine's target was converted from (``--target x.gguf`` or the catalogue's)."""
    from specdec.catalog.store import gguf_path

    if target is not None and str(target).endswith(".gguf"):
        return Path(target)
    model = getattr(engine, "model", None)
    path = gguf_path(model) if model is not None and model.gguf else None
    if path is None or not path.is_file():
        name = getattr(engine, "model_name", None) or "this model"
        why = f"{path} is missing" if path is not None else "it has no GGUF file"
        raise LlamaCppError(f"--compare-llamacpp runs llama.cpp on the model's GGUF file: {why} ({name})")
    return path


def draft_gguf(engine) -> tuple[Path | None, str]:
    """The draft's GGUF when the engine's draft is a catalogue model with one, else why not."""
    from specdec.catalog import known
    from specdec.catalog.store import gguf_path

    model = getattr(engine, "model", None)
    if getattr(engine, "draft_model", None) is None or model is None or model.draft is None:
        return None, "no llamacpp-draft row: the engine's draft (if any) is not a catalogue model with a GGUF file"
    path = gguf_path(known.get(model.draft))
    return (path, "") if path.is_file() else (None, f"no llamacpp-draft row: {path} is missing")


def cores() -> int:
    """The cores this process may run on: llama.cpp's default thread count here."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def runner_for(engine, target=None, threads: int | None = None):
    """``(texts, ids, max_new, repeats) -> (rows, config)`` for run_bench, checked (and llama-server
    built) before any of our rows run. ``threads``: llama.cpp's, default every core this process may
    use (our engine's count is its calibration's, which keeps one thread where a second buys
    nothing for its own step; llama.cpp's may still gain, and the comparison is each at its best)."""
    from specdec.bench.llamacpp_build import server_binary

    gguf, exe = engine_gguf(engine, target), server_binary()
    draft, why = draft_gguf(engine)
    if why:
        print(why, file=sys.stderr)
    threads = threads or cores()

    def run(texts, ids, max_new, repeats):
        return llamacpp_rows(gguf, threads, ids, max_new, texts, repeats, draft, exe=exe)

    return run
