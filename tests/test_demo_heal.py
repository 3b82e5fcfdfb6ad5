"""The demo heals a typed prompt at its last token boundary (issue 32, item 9): a prompt ending in a
newline no longer derails the model, and the page shows the prompt as typed."""

from __future__ import annotations

from specdec.core.config import GenerateSpec
from specdec.core.healing import split_prompt
from specdec.demo.runs import Run

PROMPT = "import os\nimport sys\n\n\ndef main():\n"


def test_split_prompt_backs_off_a_trailing_newline_run_and_words():
    assert PROMPT[split_prompt(PROMPT) :] == "\n"
    assert "def f():\n    "[split_prompt("def f():\n    ") :] == "\n    "
    assert "x = foo"[split_prompt("x = foo") :] == " foo"
    assert split_prompt("\n") == 1  # nothing to back off to: the whole prompt stays


def test_a_prompt_ending_in_a_newline_continues_indented_when_healed(backend):
    texts = {}
    for heal in (False, True):
        run = Run(backend, PROMPT, GenerateSpec(method="draft", max_new_tokens=10), heal=heal)
        texts[heal] = "".join(ev.text for batch in run.batches() for ev in batch)
        assert run.healed == ("\n" if heal else "")
    assert not texts[False][:1].isspace()  # the bug: the body starts at column 0
    assert texts[True].startswith("    "), texts[True]  # healed: the model merges the newline with the indent
    chat = Run(backend, PROMPT, GenerateSpec(method="none", max_new_tokens=2, heal="x"), heal=True)
    assert chat.healed == "" and chat.spec.heal == "x"  # a caller's own heal text is kept
