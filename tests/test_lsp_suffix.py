"""Unit tests of the pure pieces the language server added for everyday use: the text after the
cursor (specdec.lsp.suffix), the repetition filter (specdec.lsp.quiet), one shared generation (specdec.lsp.shared) and
dropping a closed document's caches (specdec.lsp.completer)."""

from __future__ import annotations

import asyncio

import pytest

from specdec.lsp.completer import Completer
from specdec.lsp.quiet import EARLY_SOLID, EarlyJunk, repetitive
from specdec.lsp.shared import Shared
from specdec.lsp.suffix import merge, open_quote, rest_of_line

CASES = [  # (line before the cursor, model's continuation, text after the cursor, the line after accepting)
    ("    with open(pa", 'th, "r") as f:', "):", '    with open(path, "r") as f:'),
    ("    with open(pa", "th):", "):", "    with open(path):"),
    ("print(", '"hi")', ")", 'print("hi")'),
    ("print(", "len(x))", ")", "print(len(x))"),
    ("print(", "len(x)", ")", "print(len(x))"),
    ("print(", "f(x) + 1", ")", "print(f(x) + 1)"),
    ("x = [", "1, 2]", "]", "x = [1, 2]"),
    ("s = '", "abc'", "'", "s = 'abc'"),
    ("f(a", ", b)", ", b)", "f(a, b)"),
    ("return ", "x", "", "return x"),
    ("f(", "x) + g(y)", ")", "f(x) + g(y)"),
]


QUOTE_CASES = [  # inside an auto-paired string: the completion's closing quote is the editor's
    ('    with open(self.path, "', 'w") as f:', '")', '    with open(self.path, "w")'),
    ('    with open(self.path, "', 'w", encoding="utf-8") as f:', '")', '    with open(self.path, "w")'),
    ('x = row["', 'name"])', '"])', 'x = row["name"])'),
    ("x = row['", "name'])", "'])", "x = row['name'])"),
    ("s = '", "it\\'s')", "')", "s = 'it\\'s')"),
    ('print(f"', 'Hello {name}!")', '")', 'print(f"Hello {name}!")'),
    ('print(f"{', 'x + 1}")', '}")', 'print(f"{x + 1}")'),
    ("msg = f'{", "user['name']}'", "}'", "msg = f'{user['name']}'"),
    ('    """', 'Return the lines."""', '"""', '    """Return the lines."""'),
    ("print(", '"a)b")', ")", 'print("a)b")'),  # a bracket inside a string the completion opens
]


def _accept(before: str, text: str, after: str, type_over: bool = True) -> str:
    insert, n = merge(text, rest_of_line(after), type_over, before)
    return before + insert + after[n:]


@pytest.mark.parametrize("before, text, after, want", QUOTE_CASES)
def test_without_type_over_an_unmatched_closing_quote_ends_the_item_like_a_bracket(before, text, after, want):
    assert _accept(before, text, after, type_over=False) == want


@pytest.mark.parametrize("before, text, after, want", QUOTE_CASES)
def test_with_type_over_the_closing_quote_is_typed_over_never_doubled(before, text, after, want):
    line = _accept(before, text, after)
    assert line.startswith(want[: len(want) - len(after)]) and after.strip() * 2 not in line


def test_open_quote_is_the_string_left_open_before_the_cursor():
    assert open_quote('open(p, "') == '"' and open_quote("row['") == "'" and open_quote('f"{x') == '"'
    assert open_quote('    """') == '"""' and open_quote('x = "a\\"') == '"'
    assert open_quote('x = "a" + ') is None and open_quote("x = ''") is None
    assert open_quote("# don't") is None and open_quote("") is None
    # a quote typed by the user with no closing quote after the cursor closes the string: kept
    assert merge('w")', ")", False, 'open(p, "') == ('w"', 0)


@pytest.mark.parametrize("before, text, after, want", CASES)
def test_merge_never_duplicates_what_the_editor_has(before, text, after, want):
    assert _accept(before, text, after) == want


@pytest.mark.parametrize("before, text, after, want", CASES)
def test_without_type_over_the_editors_text_stays_and_is_not_repeated(before, text, after, want):
    line = _accept(before, text, after, type_over=False)
    assert line.endswith(after) and line.count(")") <= want.count(")") and "\n" not in line


def test_merge_keeps_one_line_in_the_middle_of_a_line_and_everything_at_its_end():
    assert merge("x)\n    y = 2", ")") == ("x", 0)
    assert merge("x\n    y = 2", "") == ("x\n    y = 2", 0)
    assert merge("x", "   ") == ("x", 0)
    assert rest_of_line("ab\r\ncd") == "ab" and rest_of_line("") == ""


@pytest.mark.parametrize(
    "text", [" = ' + ' + ' + ' + '", "TWSP TWSP TWSP", "=====", "self.x.x.x.x.x", "(((((", "0, 0, 0, 0, 0"]
)
def test_repetition_is_junk(text):
    assert repetitive(text, 3) and not repetitive(text, 0)


@pytest.mark.parametrize(
    "text", ["self.x = x", "a, b, c", "xxx = foo(bar)", "(self, x, y, z)", "    return x", "", "    ", "i += 1"]
)
def test_ordinary_code_is_not_junk(text):
    assert not repetitive(text, 3)


def test_a_completion_in_progress_is_junk_once_long_enough_and_repetitive():
    watch = EarlyJunk(3)
    assert not watch("0, 0, 0, 0")  # repetitive, but too short to judge yet
    assert watch("x = [" + "0, " * EARLY_SOLID)
    ordinary = EarlyJunk(3)
    line = "result = compute_the_value(first_argument, second)"
    assert not ordinary(line[:30]) and ordinary.next == 2 * EARLY_SOLID  # checked once, then at double
    assert not ordinary(line[:40])  # below the next mark: not checked again
    assert ordinary(line + " + x" * 30)  # the loop came later: caught at the next mark
    assert not EarlyJunk(0)("0, " * 100)  # the filter is off: never junk


def test_one_generation_serves_every_request_for_the_same_key():
    async def main():
        shared, calls = Shared(), []

        async def start():
            calls.append(1)
            await asyncio.sleep(0.05)
            return "text"

        a, b = await asyncio.gather(shared.get("k", start), shared.get("k", start))
        assert (a, b, len(calls), len(shared)) == ("text", "text", 1, 0)

        started = asyncio.Event()
        cancelled = []

        async def long():
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(1)
                raise
            return "late"

        one = asyncio.ensure_future(shared.get("j", long))
        two = asyncio.ensure_future(shared.get("j", long))
        await started.wait()
        one.cancel()  # one client cancels: the generation goes on for the other
        await asyncio.sleep(0.01)
        assert not cancelled and not two.done()
        two.cancel()  # the last waiter cancels: the generation stops
        with pytest.raises(asyncio.CancelledError):
            await two
        assert cancelled == [1] and len(shared) == 0

    asyncio.run(main())


class _Backend:
    class capabilities:
        corpus, heal = True, False

    class limits:
        context = 512

    methods = ("none", "lookup")

    def encode(self, text):
        return [ord(c) % 100 for c in text]


def test_closing_a_document_drops_its_lookup_ids():
    from specdec.lsp.completion import Options

    c = Completer(_Backend())
    others = [(f"file:///{i}.py", 1, "x = 1\n" * 50) for i in range(5)]
    c.prepare("def f(", "", others, Options(method="lookup"))
    assert len(c._others) == 5
    for uri, _, _ in others:
        c.forget(uri)
    assert not c._others
