"""The shipped prompt sets (assets/prompts/) and their reader (specdec/bench/prompts.py): every file
parses, both sets have every category, the README's table names each file with its count, source
and licence, the held-out set shares no prompt with the shipped one (or a training set), and the
reader's set names, per-category slicing, filter and rendering behave as docs/bench.md says."""

from __future__ import annotations

import json
import re

import pytest

from specdec.bench import prompts as P
from specdec.engine.chat import render

CATEGORIES = {"chat", "summarise", "rag", "translate", "maths", "docstring", "code", "edits"}
CHAT_FORM = {"chat", "summarise", "rag", "translate", "maths"}  # conversations; the code sets are completions
README = P.SETS_DIR / "README.md"


def _files():
    return sorted(p for p in P.SETS_DIR.rglob("*.jsonl") if "train" not in p.relative_to(P.SETS_DIR).parts)


def _readme_rows() -> dict[str, dict]:
    rows = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `([^`]+\.jsonl)` \| (\w+) \| (\d+) \| (.+?) \| (.+?) \|$", line)
        if m:
            rows[m[1]] = {"category": m[2], "n": int(m[3]), "source": m[4], "licence": m[5]}
    return rows


def _texts(path) -> list[str]:
    return [json.dumps(it.messages or it.prompt, sort_keys=True) for it in P.read_file(path)]


def test_every_file_parses_with_unique_ids_and_its_category() -> None:
    for path in _files():
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        items = P.read_file(path)
        assert len(items) == len(records) >= 12, path
        assert {it.category for it in items} == {path.stem}, path
        if "id" in records[0]:
            assert len({r["id"] for r in records}) == len(records), f"{path}: duplicate ids"
        form = "messages" if path.stem in CHAT_FORM else "prompt"
        assert all(form in r for r in records), f"{path}: {path.stem} prompts are {form}"


def test_both_sets_have_every_category() -> None:
    for name in ("all", "heldout"):
        groups = P.by_category(P.load_items(name))
        assert set(groups) == CATEGORIES, name
        assert all(len(g) >= 12 for g in groups.values()), name


def test_the_readme_lists_every_file_with_its_count_source_and_licence() -> None:
    rows = _readme_rows()
    files = {str(p.relative_to(P.SETS_DIR)): p for p in _files()}
    assert set(rows) == set(files), "README.md's table and the files differ"
    for rel, row in rows.items():
        assert row["category"] == files[rel].stem, rel
        assert row["n"] == len(P.read_file(files[rel])), f"{rel}: README says {row['n']} prompts"
        assert row["source"].strip() and row["licence"].strip(), rel


def test_passages_are_realistic_lengths() -> None:
    for name in ("summarise", "rag", "heldout/summarise", "heldout/rag"):
        for it in P.load_items(name):
            words = len(it.messages[-1]["content"].split())
            assert 150 <= words <= 450, f"{it.where}: {words} words"


def test_the_heldout_set_shares_no_prompt_with_the_shipped_or_a_training_set() -> None:
    held = {t for p in (P.SETS_DIR / "heldout").glob("*.jsonl") for t in _texts(p)}
    shipped = {t for p in P.SETS_DIR.glob("*.jsonl") for t in _texts(p)}
    assert not held & shipped
    train = P.SETS_DIR / "train"
    if train.is_dir():  # written by self-distillation training: it must not contain held-out prompts
        text = "\n".join(p.read_text(encoding="utf-8") for p in train.rglob("*.jsonl"))
        for it in P.load_items("heldout"):
            body = it.prompt or it.messages[-1]["content"]
            assert body[:200] not in text, f"{it.where} appears in assets/prompts/train/"


def test_set_names_limit_per_category_filter_and_interleaving(tmp_path) -> None:
    assert {"all", "heldout", "chat", "code"} <= set(P.set_names())
    assert P.resolve("chat") == [P.SETS_DIR / "chat.jsonl"]
    assert P.resolve("heldout/rag") == [P.SETS_DIR / "heldout" / "rag.jsonl"]
    items = P.load_items("all", limit=2, categories=["rag", "chat"])
    assert [it.category for it in items] == ["rag", "chat", "rag", "chat"]  # interleaved, filter's order
    sliced = P.load_items("all", limit=1, offset=1, categories=["chat"])
    assert sliced[0].where == P.load_items("chat")[1].where  # offset and limit apply per category
    with pytest.raises(P.PromptFileError, match="no category poetry .*it has: chat"):
        P.load_items("all", categories=["poetry"])
    with pytest.raises(P.PromptFileError, match="file not found.*heldout"):
        P.load_items(tmp_path / "nope")
    with pytest.raises(P.PromptFileError, match="folder holds no .jsonl"):
        P.load_items(tmp_path)


def test_records_and_rendering(tmp_path) -> None:
    path = tmp_path / "mine.jsonl"
    conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
    lines = [{"prompt": "def f(x):\n    return"}, {"messages": conv, "category": "chat"}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    code, chat = P.read_file(path)
    assert code.category == "mine" and chat.category == "chat"
    assert code.text() == code.text(object()) == lines[0]["prompt"]
    assert chat.text() == "System: Be brief.\n\nUser: Hi?\n\nAssistant:"  # no template: plain text

    class Templated:  # a tokenizer with a chat template, as transformers' are
        chat_template = "x"

        def apply_chat_template(self, msgs, tokenize, add_generation_prompt):
            turns = "".join(f"<{m['role']}>{m['content']}" for m in msgs)
            return turns + ("<assistant>" if add_generation_prompt else "")

    assert chat.text(Templated()) == render(Templated(), conv) == "<system>Be brief.<user>Hi?<assistant>"
    assert P.load_prompts(path) == [lines[0]["prompt"], chat.text()]
    for bad, why in (
        ({"messages": [{"role": "bot", "content": "x"}]}, "role must be one of"),
        ({"messages": []}, "non-empty list"),
        ({"prompt": "x", "category": ""}, "category"),
        ({"text": "x"}, 'a non-empty "prompt" string or a "messages" list'),
    ):
        path.write_text(json.dumps(bad) + "\n", encoding="utf-8")
        with pytest.raises(P.PromptFileError, match=re.escape(f"{path}:1: ") + ".*" + re.escape(why)):
            P.read_file(path)
