"""The Chat tab's conversation and how it is drawn (pure: no gradio, no torch).

Why one growing body: the tab shows the whole conversation in one token stream box
(specdec/demo/stream.py), whose page script only appends what is new within a run. So the body is
built to grow by appending only: each finished turn is the user's message (a block), the reply's
token spans exactly as they streamed (fates kept, so the inspector works on every earlier reply
too) and a meta line; the reply streaming now is appended after them. A conversation is one
stream run (``run``); Clear starts a new one.

Contract:
- ``Conversation``: one browser session's chat. ``messages(system, user)`` is the OpenAI-style list
  for ``specdec.engine.chat.render``: the system prompt (when not blank), every finished turn, then
  the new message. ``add(user, reply, html)`` keeps a finished turn; ``body()`` is every finished
  turn's HTML; ``clear()`` drops the turns and bumps ``epoch``, so a reply still streaming when
  the conversation was cleared is dropped, never added to the new one. ``busy`` is set while a
  reply streams (one reply at a time per conversation).
- ``user_html(text)``: the user's message, escaped, as a block.
- ``reply_meta(method, k, t, end)``: one line for a finished reply: method, k, tau, tokens/s on the
  engine's clock, tokens and how it ended; ``meta_html`` wraps it (``data-method``, ``data-k``).
- ``check_message(text)``: the message, or ``ConfigError`` when it is blank.
- ``CARRY``: the tab's one line on why speculation carries across turns.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from specdec.core.config import ConfigError
from specdec.demo import render as R
from specdec.demo.wording import plural

CARRY = (
    "Speculation carries across turns on its own: each turn's prompt is the whole conversation so far, "
    "so it extends the last one, and prompt lookup copies from earlier turns (names, code, your own words)."
)
USER_STYLE = (
    "display:block;margin:10px 0 6px;padding:4px 8px;border-left:3px solid #7c3aed;"
    "background:rgba(124,58,237,.08);font-family:inherit;white-space:pre-wrap"
)
META_STYLE = "display:block;margin:4px 0 2px;font-size:11px;opacity:.7"


@dataclass
class Turn:
    user: str
    reply: str
    html: str


class Conversation:
    """See the module docstring. A plain class: ``gr.State(Conversation())`` deep-copies it per session."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.epoch = 0
        self.busy = False

    @property
    def run(self) -> str:
        return f"chat-{self.epoch}"

    def messages(self, system: str | None, user: str) -> list[dict[str, str]]:
        out = [{"role": "system", "content": system}] if system and system.strip() else []
        for turn in self.turns:
            out += [{"role": "user", "content": turn.user}, {"role": "assistant", "content": turn.reply}]
        return out + [{"role": "user", "content": user}]

    def add(self, user: str, reply: str, shown: str) -> None:
        self.turns.append(Turn(user, reply, shown))

    def body(self) -> str:
        return "".join(t.html for t in self.turns)

    def clear(self) -> None:
        self.turns = []
        self.epoch += 1


def check_message(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("the message is empty: type something to say to the model")
    return text.strip()


def user_html(text: str) -> str:
    return f'<div class="sd-chat-user" style="{USER_STYLE}">{html.escape(text)}</div>'


def reply_meta(method: str, k: object, t: R.Transcript, end: str) -> str:
    s = t.stats
    tau = R.num(s and s.tau, ".2f")
    speed = R.num(s and s.tokens_per_s, ".1f")
    k_txt = "" if method == "none" else f", k {k}"
    return f"{method}{k_txt} · tau {tau} · {speed} tok/s · {plural(len(t.token_ids), 'token')} ({end})"


def meta_html(method: str, k: object, line: str) -> str:
    return (
        f'<div class="sd-chat-meta" data-method="{html.escape(method)}" data-k="{html.escape(str(k))}" '
        f'style="{META_STYLE}">{html.escape(line)}</div>'
    )
