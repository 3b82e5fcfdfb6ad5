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
