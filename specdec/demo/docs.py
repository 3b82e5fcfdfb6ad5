"""The project's docs, served by the demo so every link in the Teach view answers (no 404 pages).

Contract:
- ``ROUTE`` ("/specdec-docs/") is where ``mount(app)`` serves ``docs/NAME.md`` rendered to HTML
  (markdown-it, which gradio already depends on) and the files under ``docs/results`` and
  ``docs/img``; any other path answers 404, and nothing outside ``docs/`` is ever read.
- ``rewrite_links(md)``: relative links to ``*.md`` pages and to ``results/`` or ``img/`` files point
  into ``ROUTE``; other relative links (source files outside docs/) become plain code text, so a page
  never shows a link that cannot open. Absolute http(s) links are left alone.
- ``read_doc(name)`` is a page's Markdown with its links rewritten (the Teach view renders it with
  gradio's KaTeX; the served HTML shows formulas as TeX source).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from specdec.paths import DOCS as DOCS_DIR

DOCS = DOCS_DIR
ROUTE = "/specdec-docs/"
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
_NAME = re.compile(r"^(?:(?:results|img|log)/)?[\w.-]+\.(?:md|svg|png|json)$")
_TYPES = {".svg": "image/svg+xml", ".png": "image/png", ".json": "application/json"}


def _target(url: str) -> str | None:
    """Where a relative link goes in ROUTE, or None when it leaves docs/."""
    path, _, anchor = url.partition("#")
    if not path:
        return url  # an anchor on the same page
    if not _NAME.match(path):
        return None
    return ROUTE + path + (f"#{anchor}" if anchor else "")


def rewrite_links(md: str) -> str:
    def fix(m: re.Match) -> str:
        bang, text, url = m.groups()
        if re.match(r"^[a-z]+:", url) or url.startswith("/"):
            return m.group(0)
        target = _target(url)
        if target is None:
            return text if text.startswith("`") else f"`{text}`"
        return f"{bang}[{text}]({target})"

    return _LINK.sub(fix, md)


def resolve(path: str) -> Path | None:
    """The file under docs/ for a served path, or None (unknown, or outside docs/)."""
    if not _NAME.match(path):
        return None
    f = (DOCS / path).resolve()
    return f if f.is_file() and DOCS in f.parents else None


def read_doc(name: str) -> str:
    f = resolve(name)
    if f is None or f.suffix != ".md":
        raise FileNotFoundError(name)
    return rewrite_links(f.read_text(encoding="utf-8"))


def render_page(name: str) -> str:
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render(read_doc(name))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(name)} · specdec</title>"
        "<style>body{font-family:system-ui,sans-serif;max-width:900px;margin:2em auto;padding:0 1em;"
        "line-height:1.5}code,pre{font-family:ui-monospace,Menlo,Consolas,monospace}pre{background:#f6f8fa;"
        "padding:8px;overflow:auto}table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:2px 6px}"
        "img{max-width:100%}</style></head><body>"
        f"<p><a href='{ROUTE}theory.md'>theory index</a> · formulas are shown as TeX source here; "
        f"the demo's Teach view renders them.</p>{body}</body></html>"
    )


def mount(app) -> None:
    """Add the docs route to gradio's FastAPI app (before its catch-all routes)."""
    from fastapi import HTTPException
    from fastapi.responses import FileResponse, HTMLResponse

    def serve(path: str):
        f = resolve(path)
        if f is None:
            raise HTTPException(404, f"no such page under docs/: {path}")
        if f.suffix == ".md":
            return HTMLResponse(render_page(path))
        return FileResponse(f, media_type=_TYPES.get(f.suffix))

    app.add_api_route(ROUTE + "{path:path}", serve, methods=["GET"], include_in_schema=False)
    app.router.routes.insert(0, app.router.routes.pop())  # first, so no catch-all shadows it
