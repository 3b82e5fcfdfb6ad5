"""The proposers' weight precision, timed in the decoding loop's own cold state (``lowp.py``).

Why: a proposer's weights are read cold in the loop (the target's step has just streamed its own
weights through the cache), so timing a proposer hot, alone, favours float32, while timing it
after a target step measures what the loop pays. Each sample runs one plain target step, then the
proposer's decoding work once, per precision, alternating; the minimum of each is kept.

Contract: ``parts(engine) -> {name: proposer}``: the proposers with more than one precision
(``precisions``, ``set_precision``); ``measure(engine, parts) -> {name: {precision: us}}``, the
timings ``calibrate.decide`` reads (``"precision"``). The work timed per proposer:
- draft: a 2-token catch-up and two 1-token greedy forwards of its current forward (``runner``);
- medusa: one tree (every head the tree reaches, then the top-k);
- eagle: one tree (catch-up of the last pair, the levels, the LM head over the beam).
A precision whose draft on the calibration text differs from float32's (a coarser precision
can change what the proposer predicts, and so the acceptance, which a timing cannot see) is left
out of the timings, so it is never chosen. It leaves every proposer in float32 with empty caches
and the target's cache empty; the choice is installed by ``calibrate.apply``. About 0.1 s per
proposer for the shipped models.
"""

from __future__ import annotations

import time

import torch

from specdec.core.config import GenerateSpec
from specdec.core.proposer import Context
from specdec.core.tree import Draft
from specdec.models import cache as kv

SAMPLES = 2
TEXT = (
    "def read_lines(path):\n"
    '    """Return the stripped lines of a text file."""\n'
    "    with open(path) as f:\n"
    "        return [line.strip() for line in f]\n\n\n"
    "def main(argv):\n"
    "    for name in argv[1:]:\n"
    "        "
)


def parts(engine) -> dict:
    return {
        name: prop
        for name, prop in engine.proposers.items()
        if len(getattr(prop, "precisions", ())) > 1 and hasattr(prop, "set_precision")
    }


def _draft_work(prop, ids: list[int]):
    runner, n = prop.runner, len(ids)
    runner.truncate(0)
    runner.forward(ids[:-2])

    def work():
        runner.truncate(n - 2)
        a = runner.forward(ids[-2:]).argmax()
        b = runner.forward([int(a)]).argmax()
        return [int(a), int(b), int(runner.forward([int(b)]).argmax())]

    def done():
        runner.truncate(0)
        prop.state.forget()

    return work, done


def _tree_work(prop, ctx: Context):
    def work():
        d = prop.tree(ctx)  # the solo request's tree on the solo state (no auto-k fallback)
        return (d.tokens.tolist(), tuple(d.parents))

    def done():
        forget = getattr(prop.state, "forget", None)  # EAGLE's cache; Medusa's heads keep none
        if forget is not None:
            forget()

    return work, done


@torch.inference_mode()
def measure(engine, props: dict, samples: int = SAMPLES) -> dict:
    target = engine.target
    ids = engine.encode(TEXT)
    target.prefill(ids)
    ctx = Context(ids, GenerateSpec(method="none", k=1), 64, 64, None, target.hidden)
    works = {name: _draft_work(prop, ids) if name == "draft" else _tree_work(prop, ctx) for name, prop in props.items()}
    out = {name: {} for name in props}

    def plain_step():
        target.score(ids[-1], Draft.empty())
        kv.truncate(target.cache, len(target.ids))

    try:
        for name, prop in props.items():  # build every copy, warm it, keep those that draft as fp32 does
            drafts = {}
            for p in prop.precisions:
                prop.set_precision(p, keep=True)
                drafts[p] = works[name][0]()
            out[name] = {p: float("inf") for p in prop.precisions if drafts[p] == drafts["fp32"]}
        for _ in range(samples):
            for name, prop in props.items():
                for p in out[name]:
                    prop.set_precision(p, keep=True)
                    plain_step()
                    t0 = time.perf_counter()
                    works[name][0]()
                    out[name][p] = min(out[name][p], (time.perf_counter() - t0) * 1e6)
    finally:
        for name, prop in props.items():
            prop.set_precision("fp32")
            works[name][1]()
        kv.truncate(target.cache, 0)
        target.ids = []
    return out
