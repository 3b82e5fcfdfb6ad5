"""The "About the models" panel and the teaching prompts, read from the shipped model cards.

Contract:
- ``model_rows(assets)`` reads ``assets/{target,draft,medusa,eagle}/card.json`` (written by
  ``specdec train``) into one line per model: name, size in parameters, what it was trained on,
  the held-out loss where the card has one, and what to expect; a missing card is left out.
- ``about_md(assets, info=None)`` is that table with a plain warning: the models are tiny and trained
  here on Python source, so the code they write is poor; watch the mechanism. Given the loaded
  model (``specdec.demo.model_info.Loaded``) it describes that model instead when it is not the
  tiny one: the catalogue's title, parameters and licence, why a method is missing, and the cards
  of what was trained here for it (its ``assets`` folder), if any (issue 32, item 11).
- ``TEACHING`` are prompts chosen to show each method's strength, with the reason; their measured
  acceptance is in docs/demo.md ("Teaching prompts").
- ``loaded_md(info)``: what the engine runs now (specdec/demo/parts.py: every loaded draft and
  head's layers, width, FLOPs ratio and card agreement; the target's weight format and path) and
  what the measured cost ratio c means, in words (``wording.C_WORDS``); both About texts carry it.
- ``about_panel(info=None)`` builds the collapsed accordion (with the teaching prompts as text to copy).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specdec.demo import model_info as MI
from specdec.demo.parts import parts_md
from specdec.demo.wording import C_WORDS
from specdec.paths import ASSETS

TEACHING: list[tuple[str, str, str]] = [  # measured in docs/demo.md, "Teaching prompts"
    (
        "lookup shines",
        "import os\nimport sys\n\n\ndef main():\n",
        "at temperature 0 the small target repeats its own lines, and prompt lookup copies them "
        "(tau 3.6 against the draft model's 2.9)",
    ),
    (
        "the draft agrees",
        "class Config:\n    def get_name(self):\n        return self._name\n\n    def get_path(self):\n"
        "        return self._path\n\n    def get_size(self):\n",
        "at temperature 0 the draft model predicts the target better than copying does (tau 2.3 against lookup's 1.8)",
    ),
    (
        "nothing helps",
        "# 7f3a 91c2 e04b 55d8 0b6e a1f9\nKEY = '",
        "set temperature 0.8: random hex that neither the draft nor the context can guess "
        "(tau 1.2 for the draft, 1.1 for lookup); at temperature 0 the target falls into a loop that lookup copies",
    ),
]


def _card(assets: Path, name: str) -> dict[str, Any] | None:
    f = assets / name / "card.json"
    try:
        return json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _millions(n: Any) -> str:
    return f"{n / 1e6:.1f} M" if isinstance(n, (int, float)) else "?"


def _draft_row(card: dict[str, Any]) -> dict[str, str]:
    """The draft's card in one row, whichever trainer wrote it: the tiny model's card keeps its shape
    in ``draft_shape`` and FLOPs and held-out agreement; SmolLM2's in ``draft_layers`` /
    ``draft_width``, its measured step cost ratio and validation agreement."""
    opts = card.get("options", {})
    shape = opts.get("draft_shape") or {"layers": opts.get("draft_layers"), "hidden": opts.get("draft_width")}
    if "draft_to_target_flops" in card:
        cost = f"{card['draft_to_target_flops']:.2f} x the target's FLOPs per token"
    elif "c_step_ratio" in card:
        cost = f"a draft step measured at {card['c_step_ratio']:.2f} x a target step when trained"
    else:
        cost = "cost: see the loaded table"
    agree = card.get("greedy_agreement", card.get("validation_greedy_agreement"))
    loss = card.get("heldout_loss_draft", card.get("kept_validation_loss"))
    return {
        "model": "draft (q)",
        "size": f"{shape.get('layers') or '?'} layers, width {shape.get('hidden') or '?'} ({cost})",
        "trained on": "distilled from the target (its next-token distributions or its greedy answers)",
        "held-out loss": f"{loss:.2f}" if isinstance(loss, (int, float)) else "-",
        "expect": f"agrees with the target's greedy token {agree:.0%} of the time" if agree is not None else "-",
    }


def model_rows(assets: Path = ASSETS) -> list[dict[str, str]]:
    rows = []
    target = _card(assets, "target")
    if target:
        shape = target.get("options", {}).get("target_shape", {})
        rows.append(
            {
                "model": "target (p)",
                "size": _millions(target.get("parameters")),
                "trained on": f"{target.get('train_tokens_seen_target', 0) / 1e6:.1f} M tokens of Python source",
                "held-out loss": f"{target['heldout_loss_target']:.2f}" if "heldout_loss_target" in target else "-",
                "expect": f"a Llama of {shape.get('layers', '?')} layers, width {shape.get('hidden', '?')}: "
                "plausible-looking, often wrong code",
            }
        )
    draft = _card(assets, "draft")
    if draft:
        rows.append(_draft_row(draft))
    for name, label in (("medusa", "Medusa heads"), ("eagle", "EAGLE head")):
        card = _card(assets, name)
        if card:
            expect = (
                f"about {card['tree_expected_tau']:.1f} tokens per target forward on its trained tree"
                if "tree_expected_tau" in card
                else "drafts a dynamic tree from the target's own features"
            )
            rows.append(
                {
                    "model": label,
                    "size": _millions(card.get("parameters")),
                    "trained on": "the target's own distributions (the target stays frozen)",
                    "held-out loss": "-",
                    "expect": expect,
                }
            )
    return rows


def _table(rows: list[dict[str, str]]) -> str:
    return "| model | size | trained on | held-out loss | what to expect |\n|---|---|---|---|---|\n" + "".join(
        f"| {r['model']} | {r['size']} | {r['trained on']} | {r['held-out loss']} | {r['expect']} |\n" for r in rows
    )


def loaded_md(info: MI.Loaded | None) -> str:
    """What runs now, read from the loaded engine (specdec/demo/parts.py), and what c means."""
    text = parts_md(info.engine) if info is not None else ""
    return f"\n\n### Loaded now\n{text}\n\n{C_WORDS}" if text else ""


def _other_md(info: MI.Loaded) -> str:
    """A model other than the shipped tiny one: the catalogue, what is loaded, the cards trained here."""
    assets = info.entry.assets if info.entry is not None else None
    rows = model_rows(assets) if assets is not None and assets != ASSETS else []
    trained = f"\n\nTrained here for it (their cards):\n\n{_table(rows)}" if rows else ""
    return MI.model_md(info) + loaded_md(info) + trained


def about_md(assets: Path = ASSETS, info: MI.Loaded | None = None) -> str:
    if info is not None and not info.tiny:
        return _other_md(info)
    table = _table(model_rows(assets))
    head = f"{MI.title_line(info)}\n\n" if info is not None else ""
    missing = MI.unavailable_md(info) if info is not None else ""
    prompts = "\n".join(f"- **{name}**: {why}." for name, _, why in TEACHING)
    return head + (
        "The shipped models are **tiny and were trained here**, on Python source (the standard library "
        "and a few installed packages), in minutes on a CPU (docs/training.md). Their code is poor "
        "(`def fibonacci(n):` may continue with nonsense): watch the mechanism, whose output equals the "
        "target's own, not the quality of the code. "
        "A real pretrained model runs with `specdec demo --model smollm2-135m` (`specdec models` lists them), "
        "any local Hugging Face pair with `specdec demo --target DIR --draft DIR`.\n\n"
        f"{table}\n{missing}{loaded_md(info)}\n\nTeaching prompts (in the example list as *teach: ...*):\n{prompts}"
    )


def about_panel(info: MI.Loaded | None = None) -> None:
    import gradio as gr

    with gr.Accordion("About the models", open=False, elem_id="sd-about"):
        gr.Markdown(about_md(info=info), elem_id="sd-about-text")
