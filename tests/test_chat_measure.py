"""``python -m specdec.training.chat_measure --prompts FILE``: which rows it can read.

The cards' figures come from the training set's held-out chat prompts (rows with a ``prompt``);
the bench's held-out categories (``assets/prompts/heldout/*.jsonl``) carry chat ``messages`` of
their own (a system turn, a document for rag). Both must become the same chat messages the
engine renders, every shipped held-out file included: pure logic, no model needed.
"""

from __future__ import annotations

from specdec.paths import ASSETS
from specdec.training.chat_measure import _messages
from specdec.training.chat_prompts import read


def test_prompt_rows_become_one_user_turn_and_message_rows_are_kept():
    assert _messages({"prompt": "hi"}) == [{"role": "user", "content": "hi"}]
    turns = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert _messages({"messages": turns, "prompt": "ignored"}) == turns


def test_every_shipped_heldout_file_reads():
    files = sorted((ASSETS / "prompts" / "heldout").glob("*.jsonl")) + [ASSETS / "prompts" / "train" / "heldout.jsonl"]
    assert len(files) >= 9
    for f in files:
        for row in read(f):
            msgs = _messages(row)
            assert msgs and msgs[-1]["role"] == "user" and msgs[-1]["content"].strip(), (f.name, row)
