"""Step through at a projector's 1280x720 and a phone's 390x844 (issue 32, item 8), in Debian's
chromium driven by Playwright: the verifier's table must fit its panel (or scroll inside it) so the
verdict column is never cut off, and a rejected row strikes through its token, never its verdict."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
sync_api = pytest.importorskip("playwright.sync_api")
from tests.demo_helpers import (  # noqa: E402
    fill_prompt,
    set_k,
    set_max_new,
    set_method,
    set_number,
)

pytestmark = pytest.mark.slow
PROMPT = "def fibonacci(n):"
FITS = """() => {
  const panel = document.querySelector('#sd-step-panel').getBoundingClientRect();
  const el = document.querySelector('#sd-step-panel table.sd-record');
  const wrap = el.parentElement, table = el.getBoundingClientRect();
  const scrolls = ['auto', 'scroll'].includes(getComputedStyle(wrap).overflowX);
  return {
    table_right: table.right, panel_right: panel.right + 1, viewport: window.innerWidth + 1,
    wrap_right: wrap.getBoundingClientRect().right, scrolls,
    overflowing: wrap.scrollWidth > wrap.clientWidth,
  };
}"""


def _sidebar(page, want_open: bool) -> None:
    """Open or close the settings sidebar (a phone starts with it closed) and wait until it is so."""
    if page.evaluate("() => document.getElementById('sd-sidebar').classList.contains('open')") != want_open:
        page.click("#sd-sidebar button.toggle-button")
    js = "o => document.getElementById('sd-sidebar').classList.contains('open') === o"
    page.wait_for_function(js, arg=want_open)


def _step_with_a_rejection(page, phone: bool) -> None:
    """Start a sampled draft run and walk to its first step with a rejected row (seeded: the same run)."""
    if phone:
        _sidebar(page, True)
    fill_prompt(page, PROMPT)
    set_method(page, "draft")
    set_k(page, "4")
    set_number(page, "sd-temperature", 0.8)
    set_max_new(page, 40)
    set_number(page, "sd-seed", 3)
    if phone:
        _sidebar(page, False)
    page.get_by_role("tab", name="Step through").click()
    page.click("#sd-step-start")
    page.wait_for_selector("#sd-step-panel .sd-panel[data-step='1']", timeout=120_000)
    for i in range(40):
        if page.locator("#sd-step-panel tr.sd-check[data-verdict=rejected]").count():
            return
        page.click("#sd-step-next")
        page.wait_for_selector(f"#sd-step-panel .sd-panel[data-step='{i + 2}']")
    raise AssertionError("no step of this run rejected a token")


@pytest.mark.parametrize("width, height", [(1280, 720), (390, 844)])
def test_step_table_fits_its_panel_and_verdicts_are_not_struck(browser, page_url, width, height):
    phone = width < 700
    ctx = browser.new_context(viewport={"width": width, "height": height}, has_touch=phone, is_mobile=phone)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(page_url)
        page.wait_for_selector("#sd-run", timeout=120_000)
        if phone:  # the page closes the settings sidebar on a phone; it must not cover the tab
            page.wait_for_function("() => !document.getElementById('sd-sidebar').classList.contains('open')")
        _step_with_a_rejection(page, phone)
        box = page.evaluate(FITS)
        assert box["wrap_right"] <= box["panel_right"] and box["panel_right"] <= box["viewport"], box
        assert box["table_right"] <= box["panel_right"] or (box["scrolls"] and box["overflowing"]), box
        row = "#sd-step-panel tr.sd-check[data-verdict=rejected]"
        deco = "e => getComputedStyle(e).textDecorationLine"
        assert page.eval_on_selector(f"{row} td:last-child span", deco) != "line-through"
        assert page.eval_on_selector(f"{row} code", deco) == "line-through"  # the token still is
        verdict = page.locator(f"{row} td:last-child span").first
        verdict.scroll_into_view_if_needed()
        assert verdict.is_visible() and "rejected" in verdict.inner_text()
        assert errors == []
    finally:
        ctx.close()
