"""Pure completion logic for the language server: options, positions, windowing, stop modes, cache.

Contract: nothing here imports pygls or torch (only the engine's torch-free settings and method
registry), so every rule is unit-testable.
- ``Options`` holds the editor's settings, typed and defaulted; ``Options.updated(data, methods)``
  validates a settings object (unknown keys, wrong types and out-of-range values raise
  ``OptionsError`` naming the field) and returns a new ``Options``.
- ``offset_at(text, line, character, encoding)`` turns an LSP position into a string index, or None
  when the line is outside the document (a character past the end of its line means the line's end,
  as the protocol says).
- ``window(prefix, ...)`` picks the part of the text before the cursor the model sees; its start
  moves in coarse steps so the target's prefill can reuse its cache while the user types.
- ``cut(text, mode, base_indent)`` says where a continuation ends in ``line`` or ``block`` mode, or
  None while it has not ended yet. A completion is always a prefix of the model's continuation.
- ``TypeAhead`` remembers the completion shown per document: if the user then types characters
  that match its start, the rest is served without running the model.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from specdec.core.config import ConfigError, parse_k
from specdec.core.methods import COMPLETE_ORDER, preferred

STOP_MODES = ("line", "block")
DEFAULT_METHOD = COMPLETE_ORDER[0]  # the registry's choice for completion (see specdec/core/methods.py)
MAX_NEW_TOKENS = 256


class OptionsError(ValueError):
    """A setting the server cannot use; the message names it and the allowed values."""


@dataclass(frozen=True)
class Options:
    """Editor settings. ``method`` None means the default: ``DEFAULT_METHOD`` when the engine has
    it, else ``none``. ``cache`` turns the typed-ahead cache on; ``telemetry`` (initialization only)
    sends a ``specdec/stats`` notification after each completion."""

    method: str | None = None
    max_new_tokens: int = 48
    stop: str = "line"
    temperature: float = 0.0
    k: int | str = "auto"
    cache: bool = True
    telemetry: bool = False
    lookup_documents: bool = True
    heal: bool = True  # token healing (specdec/core/healing.py) where the backend offers it
    fim: bool = True  # the text after the cursor in the prompt, where the model knows FIM (specdec/lsp/fim.py)
    multiline: bool | None = None  # completion-list items may hold newlines; None: from the client
    repeat_limit: int = 3  # a unit repeated this many times in a row is junk: no answer (0 = off)
    min_confidence: float = 0.2  # geometric-mean token probability below this: no answer (0 = off)
    wait_for_model: bool = False  # initialize answers once the model is loaded (scripts, benchmarks)

    def resolved_method(self, methods: tuple[str, ...]) -> str:
        if self.method is not None:
            return self.method
        return preferred(methods, COMPLETE_ORDER)

    def updated(self, data: Any, methods: tuple[str, ...]) -> Options:
        """A copy with the given settings applied, or OptionsError naming every bad one."""
        new, errors = self.applied(data, methods)
        if errors:
            raise OptionsError("; ".join(errors))
        return new

    def applied(self, data: Any, methods: tuple[str, ...] | None) -> tuple[Options, list[str]]:
        """(a copy with every valid setting applied, one message per bad setting, naming it).

        ``data`` is the settings object or ``{"specdec": {...}}``. ``None``, ``{"specdec": null}``
        and an object with no specdec setting in it (another server's section, ``{"pylsp": ...}``)
        change nothing and are no error."""
        if data is None:
            return self, []
        if not isinstance(data, dict):
            return self, [f"settings must be an object, got {type(data).__name__}"]
        known = {f.name for f in fields(self)}
        if "specdec" in data:
            data = data["specdec"]
            if data is None:
                return self, []
            if not isinstance(data, dict):
                return self, [f"specdec settings must be an object, got {type(data).__name__}"]
        elif not known & set(data):
            return self, []  # meant for another server
        new, errors = self, []
        for name in sorted(set(data) - known):
            errors.append(f"unknown setting {name!r}; known: {', '.join(sorted(known))}")
        for name in sorted(known & set(data)):
            try:
                candidate = replace(new, **{name: data[name]})
                candidate.check(methods)
                new = candidate
            except (OptionsError, TypeError) as e:
                errors.append(str(e))
        return new, errors

    def check(self, methods: tuple[str, ...] | None) -> None:
        """``methods`` None: not known yet (the model is loading); the method is checked once it is."""
        if self.method is not None and methods is not None and self.method not in methods:
            raise OptionsError(f"method must be one of {', '.join(methods)}, got {self.method!r}")
        if (
            isinstance(self.max_new_tokens, bool)
            or not isinstance(self.max_new_tokens, int)
            or not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS
        ):
            raise OptionsError(
                f"max_new_tokens must be an integer in [1, {MAX_NEW_TOKENS}], got {self.max_new_tokens!r}"
            )
        if self.stop not in STOP_MODES:
            raise OptionsError(f"stop must be one of {', '.join(STOP_MODES)}, got {self.stop!r}")
        if (
            isinstance(self.temperature, bool)
            or not isinstance(self.temperature, (int, float))
            or not 0 <= self.temperature <= 100
        ):
            raise OptionsError(f"temperature must be a number in [0, 100], got {self.temperature!r}")
        if self.k != "auto" and (isinstance(self.k, bool) or not isinstance(self.k, int)):
            raise OptionsError(f"k must be 'auto' or an integer, got {self.k!r}")
        try:
            parse_k(self.k)
        except ConfigError as e:
            raise OptionsError(str(e)) from None
        for name in ("cache", "telemetry", "lookup_documents", "heal", "wait_for_model"):
            if not isinstance(getattr(self, name), bool):
                raise OptionsError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.multiline is not None and not isinstance(self.multiline, bool):
            raise OptionsError(f"multiline must be true, false or null (from the client), got {self.multiline!r}")
        r = self.repeat_limit
        if isinstance(r, bool) or not isinstance(r, int) or not (r == 0 or 2 <= r <= 16):
            raise OptionsError(f"repeat_limit must be 0 (off) or an integer in [2, 16], got {r!r}")
        c = self.min_confidence
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 <= c < 1:
            raise OptionsError(f"min_confidence must be a number in [0, 1) (0 = off), got {c!r}")


def _units(ch: str, encoding: str) -> int:
    if encoding == "utf-32":
        return 1
    if encoding == "utf-8":
        return len(ch.encode("utf-8", "surrogatepass"))
    return 2 if ord(ch) > 0xFFFF else 1


def offset_at(text: str, line: int, character: int, encoding: str = "utf-16") -> int | None:
    """Index into ``text`` of an LSP position (``character`` counted in ``encoding`` code units)."""
    if line < 0 or character < 0:
        return None
    start = 0
    for _ in range(line):
        nl = text.find("\n", start)
        if nl < 0:
            return None
        start = nl + 1
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    if end > start and text[end - 1] == "\r":
        end -= 1
    if encoding == "utf-32":
        return min(start + character, end)
    units, i = 0, start
    while i < end and units < character:
        units += _units(text[i], encoding)
        i += 1
    return i


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def current_line(prefix: str) -> str:
    return prefix[prefix.rfind("\n") + 1 :]


def word_before(prefix: str) -> str:
    """The identifier characters just before the cursor (what an editor filters completions by)."""
    i = len(prefix)
    while i > 0 and (prefix[i - 1].isalnum() or prefix[i - 1] == "_"):
        i -= 1
    return prefix[i:]


def cut(text: str, mode: str, base_indent: int) -> str | None:
    """The completion if ``text`` (the continuation so far) has ended, else None.

    ``line``: the rest of the cursor's line, up to the continuation's first newline; nothing
    when the model ends the line at once (at a line's end ``line`` never answers with the next
    line: a single-line client would insert the newline).
    ``block``: from the continuation's first line with non-blank text on, up to the first later
    non-blank line indented at most ``base_indent`` (the indentation of the cursor's line), trailing
    blank lines dropped; a line at that indentation
    that starts with a closing bracket is kept (it closes the block).
    """
    lines = text.split("\n")
    if mode == "line":
        return None if len(lines) == 1 else (lines[0] if lines[0].strip() else "")
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None or first == len(lines) - 1:
        return None  # no content yet, or its line is still growing
    for i in range(first + 1, len(lines)):
        body = lines[i].strip()
        if not body or indent_of(lines[i]) > base_indent:
            continue
        if body[0] not in ")]}":
            return "\n".join(lines[:i]).rstrip()
        if i < len(lines) - 1:  # a closing bracket at the block's level belongs to it
            return "\n".join(lines[: i + 1]).rstrip()
        return None
    return None


def finish(text: str, mode: str, base_indent: int) -> str:
    """The completion when generation stopped on its own (EOS or the token limit); nothing if
    the model produced only whitespace."""
    if not text.strip():
        return ""
    done = cut(text, mode, base_indent)
    if done is not None:
        return done
    return text.rstrip() if mode == "block" else text


def tail(prefix: str, max_chars: int, step: int = 1024) -> int:
    """Start index of the text the model sees: at most ``max_chars`` before the cursor, moved in
    multiples of ``step`` and then to a line start, so it stays put while the user types."""
    if len(prefix) <= max_chars:
        return 0
    start = -(-(len(prefix) - max_chars) // step) * step
    nl = prefix.find("\n", start, len(prefix))
    return nl + 1 if nl >= 0 else start


def trim(ids: list[int], window: int, step: int = 64) -> int:
    """How many tokens to drop from the front so at most ``window`` remain, in multiples of ``step``."""
    over = len(ids) - window
    return 0 if over <= 0 else min(len(ids) - 1, -(-over // step) * step)


@dataclass
class Shown:
    prefix: str
    text: str
    key: tuple


class TypeAhead:
    """The completion last shown per document, to serve the rest as the user types it."""

    def __init__(self) -> None:
        self._shown: dict[str, Shown] = {}

    def remember(self, uri: str, prefix: str, text: str, key: tuple) -> None:
        if text:
            self._shown[uri] = Shown(prefix, text, key)

    def forget(self, uri: str) -> None:
        self._shown.pop(uri, None)

    def rest(self, uri: str, prefix: str, key: tuple) -> str | None:
        """The rest of the shown completion if ``prefix`` is the old one plus a start of it."""
        shown = self._shown.get(uri)
        if shown is None or shown.key != key or len(prefix) < len(shown.prefix):
            return None
        typed = prefix[len(shown.prefix) :]
        if len(typed) >= len(shown.text) or not shown.text.startswith(typed) or not prefix.startswith(shown.prefix):
            return None
        return shown.text[len(typed) :]
