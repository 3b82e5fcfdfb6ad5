"""The docs the demo links to (issue 17, defect 3: the Teach view's ten theory links answered
{"detail":"Not Found"}). Every link the Teach view shows must open; the route serves docs/ only."""

from __future__ import annotations

import re

import pytest

from specdec.demo import docs as D

LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("name", sorted(p.name for p in D.DOCS.glob("*.md")))
def test_every_relative_link_of_a_page_points_at_a_served_file(name):
    for url in LINK.findall(D.read_doc(name)):
        if url.startswith(("http://", "https://", "#")):
            continue
        assert url.startswith(D.ROUTE), f"{name}: {url} would be resolved against the demo's root"
        path = url[len(D.ROUTE) :].partition("#")[0]
        assert D.resolve(path) is not None, f"{name}: {url} names no file under docs/"


def test_links_out_of_docs_become_code_text_and_nothing_outside_docs_is_served():
    assert D.rewrite_links("see [verify](../engine/verify.py)") == "see `verify`"
    assert D.rewrite_links("[x](theory-speedup.md#optimal-k)") == f"[x]({D.ROUTE}theory-speedup.md#optimal-k)"
    assert D.rewrite_links("[w](https://arxiv.org/abs/2211.17192)") == "[w](https://arxiv.org/abs/2211.17192)"
    for bad in ("../README.md", "/etc/passwd", "results/../../README.md", "nope.md"):
        assert D.resolve(bad) is None
    assert D.resolve("theory-lossless.md") is not None


def test_the_served_page_renders_markdown():
    page = D.render_page("theory.md")
    assert "<h1>" in page and f'href="{D.ROUTE}theory-lossless.md"' in page
