"""specdec/bench/docs/figures.py: every measured figure in docs/*.md equals what docs/results gives.

Fails when a page drifts from its JSON (a number edited by hand, or a new results file written
without ``python -m specdec.bench.docs.figures --write``), and checks that the check itself has teeth: a
wrong number, a changed JSON value and an unknown figure name are all caught.
"""

from __future__ import annotations

import pytest

from specdec.bench.docs import figures as F

THEORY_PAGES = (
    "theory.md",
    "theory-speedup.md",
    "theory-measured.md",
    "theory-heads.md",
    "theory-lookup.md",
    "theory-lossless.md",
)


def test_every_page_agrees_with_the_results_json():
    assert F.ROOT / "README.md" in F.pages()
    drift = {page.name: F.render(page.read_text())[1] for page in F.pages()}
    assert not {name: lines for name, lines in drift.items() if lines}
    assert F.main(["--check"]) == 0


def test_the_readme_bench_figures_come_from_the_json():
    names = {m["name"] for m in F.MARK.finditer((F.ROOT / "README.md").read_text())}
    assert {"readme_bench_table", "readme_edits_table", "readme_fastest", "readme_none_vs_hf"} <= names
    table = F.value("readme_bench_table")
    result = F.load(F.README_BENCH)
    for name, d in {**result["methods"], **result["hf"]}.items():
        assert f"{d['tokens_per_s']:.1f}" in table, name
        assert f"{d['speedup_vs_fastest_plain']:.2f}x" in table, name


def test_the_theory_pages_carry_their_figures():
    counts = {name: len(F.MARK.findall((F.DOCS / name).read_text())) for name in THEORY_PAGES}
    assert all(n >= 1 for n in counts.values()), counts
    assert counts["theory-measured.md"] >= 30 and counts["theory-speedup.md"] >= 15


def test_a_hand_edited_number_is_caught_and_rewritten():
    text = "c = <!-- fig:bench-cpu:methods.draft.c|.2f -->0.99<!-- /fig --> in the loop"
    new, drift = F.render(text)
    want = format(F.load("bench-cpu")["methods"]["draft"]["c"], ".2f")
    assert drift and new == f"c = <!-- fig:bench-cpu:methods.draft.c|.2f -->{want}<!-- /fig --> in the loop"
    assert F.render(new)[1] == []


def test_a_changed_json_value_is_caught(monkeypatch):
    page = (F.DOCS / "theory-speedup.md").read_text()
    real = F.load("bench-cpu")
    fake = {**real, "methods": {**real["methods"], "draft": {**real["methods"]["draft"], "r_score": 9.87}}}
    orig = F.load
    monkeypatch.setattr(F, "load", lambda name: fake if name == "bench-cpu" else orig(name))
    drift = F.render(page)[1]
    assert any("9.87" in line for line in drift)


def test_path_syntax_slices_formats_and_unknown_names():
    alphas = F.load("bench-cpu")["methods"]["lookup"]["conditional_alpha_per_position"]
    assert F.lookup("bench-cpu:methods.lookup.conditional_alpha_per_position.0:3|.2f") == ", ".join(
        f"{a:.2f}" for a in alphas[:3]
    )
    identical = F.load("bench-cpu")["methods"]["lookup"]["identical"]
    assert F.lookup("bench-cpu:methods.lookup.identical|d") == str(identical)
    with pytest.raises(KeyError):
        F.value("bench-cpu:methods.no_such_method.c|.2f")
    table = F.value("sweep_table")
    assert table.count("\n") == 13 and table.startswith("| row |")  # header, rule, 12 rows
