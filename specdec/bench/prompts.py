"""Prompt sets: the files, folders and named sets every measuring tool reads its prompts from.

Contract: a prompt file is JSONL, one object per line (blank lines skipped), holding either a
non-empty ``"prompt"`` string (the text as is: code completion) or an OpenAI-style ``"messages"``
list (a conversation, rendered through the model's chat template); an optional ``"category"``
string names its workload, else the file's name does (``chat.jsonl`` -> ``chat``); other keys
(``id``, ``source``, ``reference``...) are ignored here. ``resolve(spec)`` turns what a user typed
into files: an existing ``.jsonl`` file, a folder (its ``*.jsonl`` files, sorted, not its
subfolders), or a set name looked up under ``assets/prompts/`` (``all`` = that folder: every
shipped category; ``heldout`` = ``assets/prompts/heldout/``; ``chat`` = ``assets/prompts/chat.jsonl``;
``heldout/chat`` likewise). ``load_items(spec, limit, offset, categories)`` reads them into
``PromptItem``s: ``categories`` keeps only those (an unknown name is an error listing the known
ones), ``offset``/``limit`` slice each category (so ``--limit 2`` is two prompts per category, and
one file behaves as before), and the categories are interleaved prompt by prompt (a slow drift of
the machine spreads over all of them). ``PromptItem.text(tokenizer)`` is the prompt text: a
conversation through ``specdec.engine.chat.render`` when the tokenizer has a chat template, else
``plain_text`` (role-labelled turns ending in ``Assistant:``, for base models). ``load_prompts``
returns those texts (the old list-of-strings interface every tool uses). Every problem raises
``PromptFileError`` (a ``ConfigError``) naming the file and line.

Why here: the bench, the sweep, the concurrency grid and the remote bench all take ``--prompts``;
one reader keeps their workloads alike. Sources and licences of the shipped sets:
assets/prompts/README.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specdec.core.config import ConfigError
from specdec.engine.chat import ChatError, check, has_template, render
from specdec.paths import ASSETS

SETS_DIR = ASSETS / "prompts"
ALL = "all"


class PromptFileError(ConfigError):
    """A prompt file that cannot be used; the message names the file and the line."""


@dataclass(frozen=True)
class PromptItem:
    category: str
    prompt: str | None = None
    messages: tuple[dict, ...] | None = None
    where: str = ""  # FILE:LINE, for messages about this prompt

    def text(self, tokenizer=None) -> str:
        """The prompt as the model reads it: the conversation in the model's chat template when it
        has one, role-labelled plain text otherwise; a ``prompt`` string unchanged."""
        if self.prompt is not None:
            return self.prompt
        msgs = list(self.messages)
        return render(tokenizer, msgs) if tokenizer is not None and has_template(tokenizer) else plain_text(msgs)


def plain_text(messages: list[dict]) -> str:
    """A conversation for a model without a chat template: ``Role: content`` turns, blank lines
    between them, ending in an open ``Assistant:`` turn."""
    turns = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(turns + ["Assistant:"])


def set_names() -> list[str]:
    """The names ``resolve`` knows without a path: ``all``, the folders and the files of assets/prompts/."""
    if not SETS_DIR.is_dir():
        return []
    subsets = sorted(p.name for p in SETS_DIR.iterdir() if p.is_dir() and any(p.glob("*.jsonl")))
    return [ALL] + subsets + sorted(p.stem for p in SETS_DIR.glob("*.jsonl"))


def resolve(spec: Path | str) -> list[Path]:
    """The prompt files ``spec`` names: a file, a folder's ``*.jsonl``, or a set name (above)."""
    path = Path(spec)
    if not path.exists() and not path.is_absolute():
        named = SETS_DIR if str(spec) == ALL else SETS_DIR / path
        for cand in (named, named.with_name(named.name + ".jsonl")):
            if cand.exists():
                path = cand
                break
    if path.is_file():
        return [path]
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else []
    if not files:
        what = "folder holds no .jsonl file" if path.is_dir() else "file not found"
        raise PromptFileError(
            f"prompt {what}: {spec} (a .jsonl file with one JSON object per line holding a "
            f'"prompt" string or "messages", a folder of them, or a set: {", ".join(set_names()) or "none"})'
        )
    return files


def _item(obj, path: Path, n: int) -> PromptItem:
    where = f"{path}:{n}"
    if not isinstance(obj, dict):
        obj = {}
    category = obj.get("category", path.stem)
    if not isinstance(category, str) or not category:
        raise PromptFileError(f'{where}: "category" must be a non-empty string')
    if isinstance(obj.get("prompt"), str) and obj["prompt"]:
        return PromptItem(category, prompt=obj["prompt"], where=where)
    if "messages" in obj:
        try:
            msgs = check(obj["messages"])
        except ChatError as e:
            raise PromptFileError(f"{where}: {e}") from None
        return PromptItem(category, messages=tuple(msgs), where=where)
    raise PromptFileError(f'{where}: expected an object with a non-empty "prompt" string or a "messages" list')


def read_file(path: Path) -> list[PromptItem]:
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise PromptFileError(f"{path}:{n}: not valid JSON ({e.msg} at column {e.colno})") from None
        items.append(_item(obj, path, n))
    return items


def by_category(items: list[PromptItem]) -> dict[str, list[PromptItem]]:
    """The items of each category, categories in order of first appearance."""
    groups: dict[str, list[PromptItem]] = {}
    for it in items:
        groups.setdefault(it.category, []).append(it)
    return groups


def interleave(groups: dict[str, list[PromptItem]]) -> list[PromptItem]:
    """One prompt of each category in turn (chat 1, code 1, ..., chat 2, ...)."""
    lists = list(groups.values())
    depth = max((len(g) for g in lists), default=0)
    return [g[i] for i in range(depth) for g in lists if i < len(g)]


def load_items(
    spec: Path | str, limit: int | None = None, offset: int = 0, categories: list[str] | None = None
) -> list[PromptItem]:
    files = resolve(spec)
    items = [it for path in files for it in read_file(path)]
    if not items:
        raise PromptFileError(f"{spec} holds no prompts")
    groups = by_category(items)
    if categories:
        unknown = [c for c in categories if c not in groups]
        if unknown:
            raise PromptFileError(
                f"{spec} has no categor{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)} "
                f"(it has: {', '.join(groups)})"
            )
        groups = {c: groups[c] for c in dict.fromkeys(categories)}
    # each category sliced alike, for runs merged by specdec/bench/merge.py
    groups = {c: g[offset:][:limit] if limit else g[offset:] for c, g in groups.items()}
    groups = {c: g for c, g in groups.items() if g}
    if not groups:
        raise PromptFileError(f"{spec} holds no prompts from offset {offset}")
    return interleave(groups)


def load_prompts(
    spec: Path | str, limit: int | None = None, offset: int = 0, tokenizer=None, categories: list[str] | None = None
) -> list[str]:
    """The prompt texts (``PromptItem.text``) of ``load_items``: the interface every tool reads."""
    return [it.text(tokenizer) for it in load_items(spec, limit, offset, categories)]
