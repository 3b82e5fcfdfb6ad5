"""The sidebar's example prompts: chat and prose first on a model that chats, the shipped code set after.

Why: every example used to come from the shipped code set, so on SmolLM2 (an instruct model) a
class never saw a question answered, and a question typed into Generate ended at once: without
its chat template the model's first token is the end of text (issue 52, item 2).

Contract: ``example_prompts(info) -> [(label, prompt, as_chat)]``. ``as_chat``: the prompt is a
message, sent through the model's chat template (the Generate tab's "send as a chat message" box,
which the example sets). On a model with a chat template (``info.chat``): ``CHAT`` (questions and
tasks, measured in docs/demo.md, "Teaching prompts"), then ``PROSE`` (text to continue), then the
code set. On the shipped tiny model (a code model, no template): its teaching prompts
(``about.TEACHING``) and the code set, whose default example shows every fate at temperature 0.
"""

from __future__ import annotations

import json

from specdec.demo import wording as W
from specdec.demo.about import TEACHING
from specdec.paths import ASSETS

DEFAULT_SOURCE = "transformers/models/pi0/processing_pi0.py"  # every fate shows up here at temperature 0
CHAT: list[tuple[str, str]] = [
    (
        "chat: fix the spelling",
        "Correct the spelling and write the corrected sentence out in full: Teh quick brown fox jumpd over "
        "teh lazy dog, becuase the dog was sleping in the sun.",
    ),
    (
        "chat: repeat a list (lookup copies)",
        "Repeat this list exactly, one item per line, then add one more fruit: apple, banana, cherry, grape, "
        "lemon, mango, orange, peach.",
    ),
    ("chat: why is the sky blue?", "Why is the sky blue?"),
    ("chat: a short story", "Write a short story about a cat who finds a lost key."),
]
PROSE: list[tuple[str, str]] = [
    (
        "prose: once upon a time",
        "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    ),
]


def code_prompts() -> list[tuple[str, str]]:
    """(label, prompt) from the shipped code set, the default first, each named by what it shows
    (wording.example_label), not by its file."""
    path = ASSETS / "prompts" / "code.jsonl"
    if not path.exists():
        return [("fibonacci", "def fibonacci(n):\n")]
    rows = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    rows.sort(key=lambda r: r.get("source") != DEFAULT_SOURCE)
    return [(W.example_label(r.get("source", ""), r["prompt"]), r["prompt"]) for r in rows]


def example_prompts(info=None) -> list[tuple[str, str, bool]]:
    code = code_prompts()
    if info is not None and info.chat:
        chat = [(name, text, True) for name, text in CHAT]
        return chat + [(name, text, False) for name, text in PROSE] + [(n, p, False) for n, p in code]
    teach = [(f"teach: {name}", text, False) for name, text, _ in TEACHING]
    return [(*code[0], False)] + teach + [(n, p, False) for n, p in code[1:]]
