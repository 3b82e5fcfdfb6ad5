"""Self-distillation text at scale: prompts the target writes itself (Magpie) plus the shipped
training prompts, answered greedily, resumable.

The engine that writes the text is ours by default (the batching backend on the target's q4_1
blocks) or llama.cpp's server with parallel slots (``magpie_engines.py`` says why and measures).
Generation is the slow part of self-distillation on a CPU; the heads' features are computed
afterwards in one batched forward (``features.py``), so generation needs no hidden states.

Why Magpie (Xu et al. 2024, arXiv:2406.08464): a chat model given only its template's opening of
a user turn writes a plausible user request; sampling many of them gives varied prompts in the
model's own distribution without copying any dataset. They are sampled (temperature ``magpie_engines.T_USER``,
one seed per request, reproducible); answers are greedy (temperature 0), the target's own choice
at every position, which is what a draft must predict at temperature 0.

Held-out sets are never touched: a prompt is dropped when its normalised text, or any run of
``SHINGLE`` words of it, occurs in a prompt of the evaluation sets (``assets/prompts/*.jsonl``,
``assets/prompts/heldout/``, ``assets/prompts/train/heldout.jsonl``), so acceptance measured there
stays measured on text no module was trained on. Duplicates (same normalised text) are dropped.

Contract (files under ``folder``; every write is an append of whole lines, so a killed run resumes):
- ``prompts.jsonl``: ``{"id", "prompt", "source": "shipped" | "magpie", "seed"}``, unique prompts.
- ``answers.jsonl``: ``{"id", "prompt_ids", "completion_ids", "eos"}`` for answered prompt ids.
- ``Guard(texts)``: ``guard.allows(text)``; ``normalise(text)``; ``user_prefix(tok)``: the chat
  template's text up to the user's words.
- ``run(gguf, tok, folder, tokens, parallel, ..., engine, target)``: open the engine, write prompts and answers
  until ``answers.jsonl`` holds ``tokens`` completion tokens; returns the counts (``meta.json``). A run
  holds ``folder/.lock`` (``Store(folder, write=True)``): a second run on the folder is refused.
  Ctrl-C stops every worker; no partial answer is written.
"""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

from tqdm import tqdm

from specdec.paths import ASSETS
from specdec.training import magpie_engines
from specdec.training.appendlog import lock_folder, read_lines

_BUSY = "another self-distillation run is writing {}; stop it first (or wait)"

SHINGLE = 6  # words: a shared run this long with a held-out prompt drops a prompt
MARK = "\u0000USER\u0000"


def normalise(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _shingles(text: str) -> set[str]:
    w = normalise(text).split()
    return {" ".join(w[i : i + SHINGLE]) for i in range(max(1, len(w) - SHINGLE + 1))} if w else set()


def heldout_texts(assets: Path = ASSETS) -> list[str]:
    """Every user turn or prompt of the evaluation and held-out sets."""
    p = assets / "prompts"
    files = [*sorted(p.glob("*.jsonl")), *sorted((p / "heldout").glob("*.jsonl")), p / "train" / "heldout.jsonl"]
    out = []
    for f in files:
        for line in f.read_text().splitlines():
            if line.strip():
                obj = json.loads(line)
                out += [m["content"] for m in obj.get("messages", []) if m.get("role") == "user"]
                out += [obj["prompt"]] if "prompt" in obj else []
    return out


class Guard:
    """Drops prompts that repeat one already kept or overlap a held-out prompt."""

    def __init__(self, heldout: list[str]) -> None:
        self.held = {normalise(t) for t in heldout}
        self.held_sh = set().union(*(_shingles(t) for t in heldout)) if heldout else set()
        self.seen: set[str] = set()

    def allows(self, text: str) -> bool:
        n = normalise(text)
        if not n or n in self.seen or n in self.held or _shingles(text) & self.held_sh:
            return False
        self.seen.add(n)
        return True


def user_prefix(tok) -> str:
    """The chat template's text before the user's words (system turn included, if the template has one)."""
    text = tok.apply_chat_template([{"role": "user", "content": MARK}], tokenize=False, add_generation_prompt=False)
    return text[: text.index(MARK)]


def good_user_turn(text: str, stopped: bool) -> bool:
    """A self-written request worth answering: finished, one turn, neither tiny nor rambling."""
    t = text.strip()
    return stopped and 12 <= len(t) <= 600 and "<|" not in t and len(t.split()) >= 3


class Store:
    """The two append-only files and what they already hold. ``write=True`` (a run) takes the
    folder's lock and trims a line cut by a kill; a reader (``meta``) only skips such a line."""

    def __init__(self, folder: Path, write: bool = False) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._writer = lock_folder(folder, False, _BUSY.format(folder)) if write else None
        self.prompts_f, self.answers_f = folder / "prompts.jsonl", folder / "answers.jsonl"
        self.prompts = read_lines(self.prompts_f, write)
        self.answered = {a["id"]: len(a["completion_ids"]) for a in read_lines(self.answers_f, write)}
        self.lock = threading.Lock()

    def tokens(self) -> int:
        return sum(self.answered.values())

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()  # the lock goes with it
            self._writer = None

    def add_prompt(self, row: dict) -> None:
        with self.lock:
            self.prompts.append(row)
            _append(self.prompts_f, row)

    def add_answer(self, row: dict) -> None:
        with self.lock:
            self.answered[row["id"]] = len(row["completion_ids"])
            _append(self.answers_f, row)


def _append(path: Path, row: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")


def _shipped(prompts: Path) -> list[str]:
    return [json.loads(line)["prompt"] for line in prompts.read_text().splitlines() if line.strip()]


def run(
    gguf: Path,
    tok,
    folder: Path,
    tokens: int = 1_000_000,
    parallel: int = 8,
    threads: int = 2,
    max_new: int = 256,
    shipped: Path = ASSETS / "prompts" / "train" / "train.jsonl",
    engine: str = "specdec",
    target: Path | None = None,
) -> dict:
    """Fill ``folder`` with prompts and greedy answers until ``tokens`` answer tokens are there;
    ``engine`` "specdec" (our batch backend on ``target``'s folder) or "llamacpp" (``gguf``)."""
    store = Store(folder, write=True)  # refused while another run holds the folder
    try:
        (folder / "meta.json").unlink(missing_ok=True)  # a stopped run must not show the last run's counts
        return _fill(store, gguf, tok, folder, tokens, parallel, threads, max_new, shipped, engine, target)
    finally:
        store.close()


def _fill(store, gguf, tok, folder, tokens, parallel, threads, max_new, shipped, engine, target) -> dict:
    from specdec.training.selfdistill import render

    guard = Guard(heldout_texts())
    for row in store.prompts:
        guard.allows(row["prompt"])  # already kept: later duplicates are dropped
    todo = [r for r in store.prompts if r["id"] not in store.answered]
    for text in _shipped(shipped):
        if guard.allows(text):
            row = {"id": len(store.prompts), "prompt": text, "source": "shipped", "seed": None}
            store.add_prompt(row)
            todo.append(row)
    prefix = tok(user_prefix(tok), add_special_tokens=False)["input_ids"]
    eot = tok.eos_token or "<|im_end|>"
    seeds = iter(range(1 + max((r["seed"] or 0) for r in store.prompts) if store.prompts else 0, 1 << 62))
    gate, stop, t0, made0 = threading.Lock(), threading.Event(), time.time(), store.tokens()
    bar = tqdm(total=tokens, initial=made0, desc="self-distillation answers", unit="tok", dynamic_ncols=True)

    def answer_row(gen, row: dict) -> None:
        ids = render(tok, row["prompt"])
        comp, eos = gen.answer(ids, max_new)
        store.add_answer({"id": row["id"], "prompt_ids": ids, "completion_ids": comp, "eos": eos})
        bar.update(len(comp))

    def task(gen) -> None:
        while not stop.is_set() and store.tokens() < tokens:
            with gate:
                row = todo.pop() if todo else None
                seed = next(seeds) if row is None else None
            if row is None:
                text, stopped = gen.user_turn(prefix, seed)
                with gate:
                    if not (good_user_turn(text, stopped) and guard.allows(text)):
                        continue
                    row = {"id": len(store.prompts), "prompt": text.strip(), "source": "magpie", "seed": seed}
                    store.add_prompt(row)
            answer_row(gen, row)

    if engine == "specdec":
        opened = magpie_engines.ours(target, parallel, threads)
    else:
        opened = magpie_engines.llamacpp(gguf, folder, parallel, threads, max_new, eot)
    pool = ThreadPoolExecutor(parallel)
    try:
        with opened as gen:
            _drive(pool, task, gen, parallel, stop)
    finally:
        pool.shutdown(wait=True)  # the engine is closed, so the workers end at once; none writes later
        bar.close()
    meta = {
        **counts(store),
        "max_new_tokens": max_new,
        "parallel": parallel,
        "threads": threads,
        "tokens_per_s_this_run": round((store.tokens() - made0) / max(time.time() - t0, 1e-9), 1),
        "engine": engine,
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def _drive(pool: ThreadPoolExecutor, task, gen, parallel: int, stop: threading.Event) -> None:
    """Run ``parallel`` tasks on ``pool`` until they end. On Ctrl-C (or a task's error) the others
    stop taking new prompts; leaving the engine's context then ends the requests in flight, whose
    partial answers are never written (``magpie_engines.Interrupted``, or the llama.cpp server's
    connection failing), and ``run`` joins the workers before it gives up the folder's lock."""
    try:
        futures = [pool.submit(task, gen) for _ in range(parallel)]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for f in done:
            f.result()  # the first error, raised here
    except KeyboardInterrupt:
        print("\nself-distillation: stopped; answers in flight are dropped. Re-run the same command to resume.")
        raise
    finally:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)


def meta(folder: Path) -> dict:
    """What ``run`` recorded (``meta.json``), or, for a run stopped before its target, the counts
    read from the files themselves."""
    path = folder / "meta.json"
    if path.exists():
        return json.loads(path.read_text())
    return {**counts(Store(folder)), "stopped_early": True}


def counts(store: Store) -> dict:
    return {
        "prompts": len(store.prompts),
        "answered": len(store.answered),
        "magpie_prompts": sum(r["source"] == "magpie" for r in store.prompts),
        "completion_tokens": store.tokens(),
    }
