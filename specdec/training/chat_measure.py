"""Acceptance and speed of a catalogue model's trained draft and heads, measured by the engine on
held-out chat prompts, written into their model cards.

Contract: ``measure(model, prompts, methods, max_new, limit)`` loads the engine for the catalogue
entry (its draft and heads as ``specdec generate --model`` finds them), renders each held-out
prompt through the chat template (``engine/chat.py``), decodes ``limit`` of them, evenly
spaced in the file, at temperature 0 with ``none`` and every method, and returns per method the
engine's own counters summed over the prompts
(``Stats.total``: alpha_per_position, conditional alpha, tau), tokens/s (all tokens / all
seconds) and how many prompts gave exactly ``none``'s tokens. ``write_cards(model, result)`` adds
it as ``heldout_engine`` to ``assets/<model>/<kind>/card.json`` and its README. Run as
``python -m specdec.training.chat_measure [--limit N] [--max-new N] [--auto-k] [--weights W]``: the
target on float32 weights unless ``--weights`` says otherwise (the CLI's default is q4_1 where the
model comes from a GGUF, so the cards' tokens/s are float32's), recorded as ``weights``. Speeds on a shared
CPU are rough; the acceptance figures do not depend on the machine. Each method drafts with a fixed
k (``FIXED_K``: the draft 4 tokens, the trees up to 16 nodes, the most k allows), so the figures are the
module's acceptance: with k = "auto" (``--auto-k``) the engine's probe backoff
(``proposers/fallback.py``) runs plain steps wherever drafting does not pay, and the few probes left
say little about the module.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

DIRS = {"draft": "draft", "medusa": "medusa", "eagle": "eagle"}
FIXED_K = {"draft": 4, "medusa": 16, "eagle": 16}  # the trees: 16 nodes, the most k allows (config.parse_k)


def _messages(row: dict) -> list[dict]:
    """A prompt file's row as chat messages: the training sets' ``prompt``, or the bench's held-out
    rows (``assets/prompts/heldout/*.jsonl``) with ``messages`` of their own."""
    return row["messages"] if "messages" in row else [{"role": "user", "content": row["prompt"]}]


def measure(
    model: str,
    prompts: Path,
    methods: list[str],
    max_new: int = 96,
    limit: int = 6,
    auto_k: bool = False,
    weights: str = "fp32",
) -> dict:
    from specdec.catalog.resolve import resolve
    from specdec.core.config import GenerateSpec, SamplingParams
    from specdec.core.events import Stats
    from specdec.engine.chat import render
    from specdec.engine.load import load_engine
    from specdec.training.chat_prompts import read

    choice = resolve(model)
    engine = load_engine(choice.target, choice.draft, heads=choice.heads, calibration=None)
    if weights != "fp32":  # the target's format ("auto": what `specdec generate` picks here)
        from specdec.engine.load import choose_weights

        weights = choose_weights(engine, weights)
    rows = read(prompts)
    rows = rows[:: max(1, len(rows) // limit)][:limit]  # spread over the file: every category
    texts = [render(engine.tokenizer, _messages(r)) for r in rows]
    out, ref = {}, None
    for method in ["none"] + [m for m in methods if m != "none"]:
        k = "auto" if auto_k else FIXED_K.get(method, "auto")
        spec = GenerateSpec(method=method, k=k, max_new_tokens=max_new, sampling=SamplingParams(0.0))
        engine.generate(texts[0], GenerateSpec(method=method, max_new_tokens=8))  # warm-up
        stats, toks, secs = [], [], 0.0
        for text in texts:
            t = time.perf_counter()
            res = engine.generate(text, spec)
            secs += time.perf_counter() - t
            stats.append(res.stats)
            toks.append(res.tokens)
        ref = toks if method == "none" else ref
        total = Stats.total(stats).to_dict()
        out[method] = {
            "tokens_per_s": round(sum(map(len, toks)) / secs, 2),
            "tokens": sum(map(len, toks)),
            "identical_to_none": sum(a == b for a, b in zip(toks, ref)),
            "k": k,
            **{k: total.get(k) for k in ("alpha_per_position", "conditional_alpha_per_position", "tau", "alpha")},
        }
        print(method, json.dumps(out[method]), flush=True)
    return {
        "prompts": str(prompts),
        "n_prompts": len(texts),
        "max_new_tokens": max_new,
        "weights": weights,
        "methods": out,
    }


def write_cards(model: str, result: dict) -> None:
    from specdec.catalog import known
    from specdec.training.chat_export import write_card

    assets = known.get(model).assets
    none = result["methods"].get("none", {})
    for method, folder in DIRS.items():
        card_path = assets / folder / "card.json"
        if method not in result["methods"] or not card_path.exists():
            continue
        card = json.loads(card_path.read_text())
        card["heldout_engine"] = {
            "how": "engine stats (Stats.total over the prompts) at temperature 0, chat-templated held-out "
            "prompts never trained on; tokens/s on a shared 2-core CPU, rough",
            **{k: v for k, v in result.items() if k != "methods"},
            **result["methods"][method],
            "none_tokens_per_s": none.get("tokens_per_s"),
        }
        write_card(assets / folder, card)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument(
        "--prompts",
        type=Path,
        default=Path("assets/prompts/train/heldout.jsonl"),
        help="a JSONL of rows with a `prompt` or chat `messages` (default: the training set's held-out "
        "chat prompts; the bench's held-out categories are assets/prompts/heldout/*.jsonl)",
    )
    p.add_argument("--methods", default="draft,medusa,eagle")
    p.add_argument("--max-new", type=int, default=96)
    p.add_argument("--limit", type=int, default=6)
    p.add_argument("--auto-k", action="store_true", help='k = "auto" (default: a fixed k per method, FIXED_K)')
    p.add_argument(
        "--weights",
        default="fp32",
        help="the target's weight format: fp32 (default; the cards' figures since 2026-12-05), q4_1, or auto "
        "(what `specdec generate` picks here); acceptance moves little (docs/training.md), tokens/s does",
    )
    p.add_argument("--json", type=Path, default=None, help="also write the result here")
    a = p.parse_args(argv)
    res = measure(a.model, a.prompts, a.methods.split(","), a.max_new, a.limit, a.auto_k, a.weights)
    if a.json:
        a.json.write_text(json.dumps(res, indent=2) + "\n")
    write_cards(a.model, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
