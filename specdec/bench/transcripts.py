"""Greedy transcripts on a catalogue model through the native row-exact forward: what two builds of
the kernels (two CPUs, or one CPU's native and reference paths) must agree on token for token.

Contract: ``greedy_transcripts(model, weights, prompts, tokens, prompt_set)`` loads ``model`` (a
catalogue name, no draft, no heads, nothing calibrated), runs its target on ``weights`` through the
"native" rows forward (refused with an error where it does not apply), and returns, for the first
``prompts`` prompts of ``prompt_set`` (one per category in turn, ``bench.prompts.load_items``), the
``tokens`` greedy tokens of plain decoding. ``python -m specdec.bench.transcripts`` prints them
with the kernels' path as JSON, so a run under ``SPECDEC_KERNELS_MARCH=x86-64`` (the reference)
and one under the native build can be compared with ``cmp`` (docs/memwall.md, "Every CPU").

Why its own entry: the bench measures speed with calibration choosing forwards; this fixes the
forward, so the only thing that differs between two runs is the kernels' build.
"""

from __future__ import annotations

import argparse
import json

from specdec.core.config import GenerateSpec, SamplingParams


def greedy_transcripts(
    model: str, weights: str = "q4_1", prompts: int = 12, tokens: int = 64, prompt_set: str = "heldout"
) -> list[list[int]]:
    from specdec.bench.prompts import load_items
    from specdec.catalog.resolve import resolve
    from specdec.engine.session import Engine

    choice = resolve(model)
    engine = Engine.load(choice.target, None, "cpu", "float32", heads=False)
    engine.set_weights(weights)
    engine.target.use_rows("native")
    items = load_items(prompt_set)[:prompts]
    spec = GenerateSpec(method="none", k=1, max_new_tokens=tokens, sampling=SamplingParams(temperature=0.0))
    return [engine.generate(it.text(engine.tokenizer), spec).tokens for it in items]


def main(argv: list[str] | None = None) -> None:
    from specdec.kernels import path

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--weights", default="q4_1")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--prompt-set", default="heldout")
    a = ap.parse_args(argv)
    out = greedy_transcripts(a.model, a.weights, a.prompts, a.tokens, a.prompt_set)
    print(json.dumps({"model": a.model, "weights": a.weights, "path": path(), "tokens": out}))


if __name__ == "__main__":
    main()
