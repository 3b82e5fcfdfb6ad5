"""The demo as a class would use it, in Debian's chromium driven by Playwright: several users at once,
Stop in every state, the Race, the Teach view's links, step-through, the inspector, the layouts.

Each test names the defect it guards against (issue 17). No timed assertions: where timing matters
(long tasks on the main thread) the bound is the page's own responsiveness budget, measured by the
browser's PerformanceObserver, not the speed of this machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
sync_api = pytest.importorskip("playwright.sync_api")
from app.demo import launch_demo  # noqa: E402
from tests.demo_helpers import CHROMIUM, CHROMIUM_ARGS, STATUS, free_port, set_max_new, set_method, status_has  # noqa: E402

pytestmark = pytest.mark.slow
SHORT = "import os\n"  # a short prompt leaves ~500 tokens of context: a long run


@pytest.fixture(scope="module")
def page_url(backend):
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is missing: run scripts/system-deps.sh (apt-get install -y chromium)")
    demo, _ = launch_demo(backend, port=free_port(), prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{demo.server_port}/"
    demo.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _open(browser, url: str, width: int = 1400, height: int = 900):
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector("#sd-run", timeout=120_000)
    return ctx, page


def _status(page) -> str:
    return page.inner_text(STATUS)


def test_stop_while_queued_behind_another_user(browser, page_url, backend):
    """Defect 1: B's Stop while B waits behind A was ignored (B then ran all its tokens)."""
    ctx_a, a = _open(browser, page_url)
    ctx_b, b = _open(browser, page_url)
    try:
        a.fill("#sd-prompt textarea", SHORT)
        set_method(a, "none")  # the slowest: A holds the engine for several seconds
        set_max_new(a, 500)
        a.click("#sd-run")
        status_has(a, ": step")
        b.bring_to_front()
        b.fill("#sd-prompt textarea", SHORT)
        set_max_new(b, 300)
        b.click("#sd-run")
        status_has(b, "queue")  # B waits: A holds the engine
        b.click("#sd-stop")
        status_has(b, "stopped by you")
        assert b.locator("#sd-tokens span.sd-tok").count() == 0  # B never decoded a token
        assert "running none: step" in _status(a)  # while A still runs
        a.bring_to_front()
        a.click("#sd-stop")
        status_has(a, "stopped by you")
        assert a.errors == [] and b.errors == []
    finally:
        ctx_a.close()
        ctx_b.close()


def test_every_theory_link_answers_and_the_proof_has_rendered_formulas(browser, page_url):
    """Defect 3: the index's ten links all opened {"detail":"Not Found"}; formulas were TeX source."""
    ctx, page = _open(browser, page_url)
    try:
        page.get_by_role("tab", name="Teach").click()
        for acc in ("#sd-proof", "#sd-theory-index"):
            page.click(f"{acc} button")
        page.wait_for_selector("#sd-proof .katex", timeout=60_000)
        assert page.locator("#sd-proof .katex").count() > 20
        hrefs = page.eval_on_selector_all("#sd-theory-index a[href], #sd-proof a[href]", "els => els.map(e => e.href)")
        inner = sorted({h.split("#")[0] for h in hrefs if h.startswith(page_url)})
        assert len(inner) >= 10
        for url in inner:
            r = page.request.get(url)
            assert r.status == 200, url
            assert "Not Found" not in r.text()[:200]
        assert page.errors == []
    finally:
        ctx.close()
