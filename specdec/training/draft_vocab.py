"""A reduced draft vocabulary for a catalogue draft model that was not trained here (FR-Spec).

Why: Qwen2.5-Coder-0.5B drafts for the 1.5B through a 151,936 x 896 LM head: on 4-bit blocks
(the head in Q8_0, the layers in Q4_1) about two fifths of the bytes each of its steps reads.
FR-Spec (Zhao et al. 2025, arXiv:2502.14856) reads the draft's head on the most frequent tokens
only: fewer bytes a draft step, the same output (q is zero outside the subset, the target
verifies every token: ``vocab_subset.py``).
The paper ranks tokens by their frequency in a general corpus; here the corpus is what is on
this machine and in the repository, never the held-out prompts:
- the Python standard library's own sources (the code the pair is for, with its docstrings and
  comments: English prose), read from the running interpreter's ``stdlib`` folder;
- the shipped prompts (``assets/prompts/*.jsonl``, every category) and the heads' training prompts
  (``assets/prompts/train/train.jsonl``), which bring chat, maths and translation text.
The held-out prompts (``assets/prompts/heldout/``) are only measured: the fraction of their tokens
the subset holds is written on the card, never used to choose it.

Contract: ``build(model, size)`` tokenizes the corpus with the catalogue model's tokenizer, keeps
the ``size`` most frequent ids plus the tokenizer's special tokens (end of turn, end of text: a
draft that cannot propose the end never gets it accepted), and returns (ids, card). ``main``
writes ``draft_vocab.json`` and ``card.json`` into the model's ``draft_vocab`` folder
(``python -m specdec.training.draft_vocab --model qwen2.5-coder-0.5b``), where
``engine.load.draft_weights`` finds them.
"""

from __future__ import annotations

import argparse
import json
import sysconfig
from pathlib import Path

from specdec.paths import ASSETS
from specdec.proposers import vocab_subset

TEXT_KEYS = ("prompt", "suffix", "completion", "answer", "edit", "reference")  # a prompt row's texts
SIZE = 32768  # FR-Spec's subset for Llama-3's 128k vocabulary; about a fifth of Qwen2.5's


def stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and "test" not in p.parts)


def prompt_texts(files: list[Path]) -> list[str]:
    out = []
    for f in files:
        for line in f.read_text().splitlines():
            row = json.loads(line)
            out.extend(m["content"] for m in row.get("messages", []))
            out.extend(row[k] for k in TEXT_KEYS if isinstance(row.get(k), str))
    return out


def shipped_prompts() -> list[Path]:
    return sorted((ASSETS / "prompts").glob("*.jsonl")) + [ASSETS / "prompts" / "train" / "train.jsonl"]


def tokenize(tokenizer, texts: list[str]) -> list[list[int]]:
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def build(model: str, size: int = SIZE) -> tuple[list[int], dict]:
    from transformers import AutoTokenizer

    from specdec.catalog import known, store

    m = known.get(model)
    tok = AutoTokenizer.from_pretrained(store.require(m))
    code = [p.read_text(errors="replace") for p in stdlib_files()]
    prompts = prompt_texts(shipped_prompts())
    seqs = tokenize(tok, code) + tokenize(tok, prompts)
    ids = sorted(set(vocab_subset.frequent(seqs, size)) | {int(t) for t in tok.all_special_ids})
    held = prompt_texts(sorted((ASSETS / "prompts" / "heldout").glob("*.jsonl")))
    card = {
        "name": f"{model} draft vocabulary (FR-Spec, arXiv:2502.14856)",
        "size": len(ids),
        "vocabulary": len(tok),
        "corpus": {
            "stdlib_files": len(code),
            "prompt_files": [str(p.relative_to(ASSETS)) for p in shipped_prompts()],
            "tokens": sum(map(len, seqs)),
        },
        "coverage_corpus": round(vocab_subset.coverage(seqs, ids), 4),
        "coverage_heldout_prompts": round(vocab_subset.coverage(tokenize(tok, held), ids), 4),
        "chosen_by": "the most frequent ids of the corpus plus the special tokens; "
        "the held-out prompts are measured only",
    }
    return ids, card


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", help="a catalogue model with a draft_vocab folder")
    ap.add_argument("--size", type=int, default=SIZE, help="how many of the most frequent ids to keep")
    args = ap.parse_args(argv)
    from specdec.catalog import known

    m = known.get(args.model)
    if m.draft_vocab is None:
        raise SystemExit(f"{args.model} names no draft_vocab folder in the catalogue (specdec/catalog/known.py)")
    ids, card = build(args.model, args.size)
    m.draft_vocab.mkdir(parents=True, exist_ok=True)
    vocab_subset.save(m.draft_vocab, ids)
    (m.draft_vocab / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    print(json.dumps(card, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
