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
- ``about_panel(info=None)`` builds the collapsed accordion (with the teaching prompts as text to copy).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specdec.demo import model_info as MI
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
        dshape = draft.get("options", {}).get("draft_shape", {})
        rows.append(
            {
                "model": "draft (q)",
                "size": f"{dshape.get('layers', '?')} layers, width {dshape.get('hidden', '?')} "
                f"({draft.get('draft_to_target_flops', 0):.2f} x the target's FLOPs per token)",
                "trained on": "distilled from the target (KL to its next-token distributions)",
                "held-out loss": f"{draft['heldout_loss_draft']:.2f}" if "heldout_loss_draft" in draft else "-",
                "expect": f"agrees with the target's greedy token {draft.get('greedy_agreement', 0):.0%} of the time",
            }
        )
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


def _other_md(info: MI.Loaded) -> str:
    """A model other than the shipped tiny one: the catalogue, and the cards trained here for it."""
    assets = info.entry.assets if info.entry is not None else None
    rows = model_rows(assets) if assets is not None and assets != ASSETS else []
    trained = f"\n\nTrained here for it:\n\n{_table(rows)}" if rows else ""
    return MI.model_md(info) + trained


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
        f"{table}\n{missing}\n\nTeaching prompts (in the example list as *teach: ...*):\n{prompts}"
    )


def about_panel(info: MI.Loaded | None = None) -> None:
    import gradio as gr

    with gr.Accordion("About the models", open=False, elem_id="sd-about"):
        gr.Markdown(about_md(info=info), elem_id="sd-about-text")
