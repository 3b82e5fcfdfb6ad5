"""The code-edit prompt set (assets/prompts/edits.jsonl): a function, then the start of its edited copy.

Contract: ``make_edit_prompts(files, tokenizer, n)`` takes held-out files only (the split of
``corpus.split_of``, never trained on), sorted by key; parses each with ``ast``; keeps functions
(top level or methods, dedented) of ``MIN_CHARS``..``MAX_CHARS`` characters; takes at most one
function per file, every m-th file (then the rest in order, to fill up to n), so the
prompts spread over the corpus; dunder methods are skipped. Each prompt is the
function, two blank lines, and the first two lines of an edited copy plus the indentation and
first word of its third line (a prompt ending in a bare newline would split the tokenizer's
"newline + indentation" token and push the model to column 0): the kind of edit cycles through
``EDITS`` (rename the function; rename it and its first argument; a "refactored copy" comment and
a new name). The record's ``reference`` is the copy the edit implies (the original with the same
renames), so the continuation is largely a copy of text in the prompt: the case prompt lookup is
built for. Prompts longer than ``max_prompt_tokens`` are skipped, so prompt + 128 new tokens fit
the shipped target's 512-token window. Same installed packages -> same file (the corpus manifest's
file-list hash, assets/corpus.json, says whether yours are the same).

Run: ``python -m specdec.training.edit_prompts`` (writes assets/prompts/edits.jsonl).
"""

from __future__ import annotations

import argparse
import ast
import re
import textwrap
from pathlib import Path

from specdec.training.corpus import SourceFile, default_roots, file_list_hash, list_sources, read_text, split_of
from specdec.training.prompts import write_jsonl

MIN_CHARS, MAX_CHARS = 350, 1000
EDITS = ("rename", "rename-arg", "comment")


def functions(text: str) -> list[tuple[str, str]]:
    """(name, dedented source) of every function in a module, in source order."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and not node.decorator_list
            and not node.name.startswith("__")
        ):
            src = ast.get_source_segment(text, node, padded=True)
            if src:
                out.append((node.name, textwrap.dedent(src), node))
    out.sort(key=lambda t: t[2].lineno)
    return [(name, src) for name, src, _ in out]


def _first_arg(src: str) -> str | None:
    node = ast.parse(src).body[0]
    args = [a.arg for a in node.args.args if a.arg not in ("self", "cls")]
    return args[0] if args and len(args[0]) > 1 else None


def edited_copy(name: str, src: str, edit: str) -> tuple[str, str] | None:
    """(header shown in the prompt, full reference copy) for one kind of edit, or None."""
    new = f"{name}_v2" if edit != "comment" else f"{name.lstrip('_')}_new"
    copy = re.sub(rf"\b{re.escape(name)}\b", new, src, count=1)
    lead = ""
    if edit == "rename-arg":
        arg = _first_arg(src)
        if arg is None:
            return None
        copy = re.sub(rf"\b{re.escape(arg)}\b", f"{arg}_in", copy)
    elif edit == "comment":
        lead = f"# Refactored copy of {name}, same behaviour.\n"
    lines = copy.splitlines(keepends=True)
    if len(lines) < 6:
        return None
    cut = 2
    while cut < len(lines) - 3 and not lines[cut].strip():
        cut += 1  # blank lines go into the header
    head = re.match(r"[ \t]*(\w+|\S)", lines[cut])
    if head is None:
        return None
    # end inside a line, after its indentation and first word: a prompt that ends with a bare
    # newline splits the tokenizer's usual "newline + indentation" token, and the model then
    # starts the next line at column 0
    return lead + "".join(lines[:cut]) + head.group(0), lead + copy


def make_edit_prompts(files: list[SourceFile], tokenizer, n: int = 20, max_prompt_tokens: int = 360) -> list[dict]:
    held = sorted((f for f in files if split_of(f.key) == "heldout"), key=lambda f: f.key)
    candidates = []
    for f in held:
        text = read_text(f) or ""
        fits = [(name, src) for name, src in functions(text) if MIN_CHARS <= len(src) <= MAX_CHARS]
        if fits:
            candidates.append((f, fits[len(fits) // 2]))  # one function per file, from its middle
    step = max(1.0, len(candidates) / n)
    spread = list(dict.fromkeys(int(i * step) for i in range(n) if int(i * step) < len(candidates)))
    order = spread + [i for i in range(len(candidates)) if i not in set(spread)]  # then fill up
    records: list[dict] = []
    for i in order:
        if len(records) == n:
            break
        f, (name, src) = candidates[i]
        edit = EDITS[len(records) % len(EDITS)]
        made = edited_copy(name, src, edit)
        if made is None:
            continue
        header, reference = made
        prompt = src.rstrip("\n") + "\n\n\n" + header
        if len(tokenizer.encode(prompt, add_special_tokens=False)) > max_prompt_tokens:
            continue
        records.append(
            {"prompt": prompt, "source": f.key, "function": name, "edit": edit, "reference": reference[len(header) :]}
        )
    return records


def main(argv: list[str] | None = None) -> int:
    from transformers import AutoTokenizer

    from specdec.models.loading import DEFAULT_TARGET

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("assets/prompts/edits.jsonl"))
    ap.add_argument("-n", type=int, default=20, help="number of prompts (default: 20)")
    opt = ap.parse_args(argv)
    files = list_sources(default_roots())
    tok = AutoTokenizer.from_pretrained(str(DEFAULT_TARGET))
    records = make_edit_prompts(files, tok, opt.n)
    write_jsonl(records, opt.out)
    print(
        f"wrote {len(records)} prompts to {opt.out} (file-list hash {file_list_hash(files)}; "
        f"assets/corpus.json records the one the models were trained on)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
