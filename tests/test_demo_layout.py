"""No clipped column, label or badge in any tab at a projector's and a phone's sizes (issue 52, item 4).

Debian's chromium through Playwright drives every tab after a run (Generate, Step through, Race,
Teach with its Monte Carlo draw, Chat) at 1280x720, 1366x768, 1920x1080 and 390x844, and measures
every visible element (``OVERFLOW``): one that hides what overflows it (overflow hidden or clip)
while its content is wider than its box, on a wide screen (1000 px and more) a box that must be
scrolled sideways to show a column, one that reaches past the viewport without a scrolling or
clipping box around it, the page itself scrolling sideways, an SVG label cut by its own SVG's box,
and a plot's title overlapping its axis titles or legend. Set ``SPECDEC_DEMO_IMG`` to a folder to
save each tab's screenshot there (docs/img holds the ones docs/demo.md shows). On SmolLM2 (slow,
skipped when it is not installed): Generate with a chat example and the Chat tab with a reply, at
1280x720 and 390x844.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
sync_api = pytest.importorskip("playwright.sync_api")
from specdec.demo.layout import launch_demo  # noqa: E402
from tests.demo_helpers import free_port, set_max_new, set_number, status_has  # noqa: E402
from tests.test_demo_chat import smol  # noqa: E402, F401  (SmolLM2 behind the in-process backend)

pytestmark = pytest.mark.slow
SIZES = [(1280, 720), (1366, 768), (1920, 1080), (390, 844)]
SHOTS = {(1280, 720), (390, 844)}  # the sizes whose screenshots docs/demo.md shows
FOCUS = {  # what each tab's screenshot shows
    "Generate": "#sd-tokens",
    "Step through": "#sd-step-panel",
    "Race": "#sd-race-verdict",
    "Teach": "#sd-mc-plot",
    "Chat": "#sd-chat-unavailable, #sd-chat",
}
OVERFLOW = """() => {
  const W = window.innerWidth, out = [];
  const clips = s => ['hidden', 'clip'].includes(s.overflowX);
  const scrolls = s => ['auto', 'scroll'].includes(s.overflowX);
  const cls = el => typeof el.className === 'string' ? el.className.trim().split(/\\s+/).slice(0, 2) : [];
  const name = el => [el.tagName.toLowerCase() + (el.id ? '#' + el.id : ''), ...cls(el)].join('.');
  const path = el => {
    const p = [];
    for (let e = el; e && p.length < 4; e = e.parentElement) p.unshift(name(e));
    return p.join(' > ');
  };
  const wide = el => ({el: path(el), scroll: el.scrollWidth, client: el.clientWidth});
  const shown = el => {
    if (!el.getClientRects().length) return false;
    const s = getComputedStyle(el), r = el.getBoundingClientRect();
    return s.visibility !== 'hidden' && s.display !== 'none' && r.width >= 1 && r.height >= 1;
  };
  if (document.documentElement.scrollWidth > W + 1)
    out.push({why: 'the page scrolls sideways', width: document.documentElement.scrollWidth, W});
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('#sd-sidebar:not(.open)') || !shown(el)) continue;  // a closed sidebar waits off screen
    if (el.closest('svg')) continue;  // SVG is measured below
    if (['INPUT', 'TEXTAREA', 'SELECT', 'OPTION'].includes(el.tagName)) continue;  // they scroll their text
    if (el.closest('.visually-hidden, .sr-only')) continue;  // 1-pixel boxes for screen readers, by design
    const s = getComputedStyle(el), r = el.getBoundingClientRect();
    if (W >= 1000 && scrolls(s) && el.scrollWidth > el.clientWidth + 1 && !el.closest('.tab-wrapper'))
      out.push({why: 'scrolls sideways on a wide screen', ...wide(el)});
    if (clips(s) && el.scrollWidth > el.clientWidth + 1 && s.textOverflow !== 'ellipsis')
      out.push({why: 'clipped', ...wide(el)});
    if (r.right > W + 1 || r.left < -1) {
      let held = false;
      for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
        const t = getComputedStyle(a);
        if (clips(t) || scrolls(t)) { held = true; break; }
      }
      if (!held) out.push({why: 'past the viewport', el: path(el), left: r.left, right: r.right, W});
    }
  }
  for (const svg of document.querySelectorAll('svg')) {
    if (!shown(svg) || svg.closest('#sd-sidebar:not(.open)') || svg.closest('.modebar')) continue;
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      if (!shown(t) || !t.textContent.trim()) continue;
      const r = t.getBoundingClientRect();
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
        out.push({why: 'svg label cut', el: path(svg), text: t.textContent.slice(0, 30), at: [r.left, r.right],
                  box: [box.left, box.right]});
    }
  }
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    if (!shown(plot)) continue;
    const sel = '.gtitle, .annotation-text, .g-xtitle text, .g-ytitle text, .g-x2title text, .legendtext';
    const labels = [...plot.querySelectorAll(sel)].filter(shown);
    for (let i = 0; i < labels.length; i++) for (let j = i + 1; j < labels.length; j++) {
      const a = labels[i].getBoundingClientRect(), b = labels[j].getBoundingClientRect();
      if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
        out.push({why: 'plot labels overlap', el: path(plot), a: labels[i].textContent, b: labels[j].textContent});
    }
  }
  return out;
}"""


def _sidebar(page, want_open: bool) -> None:
    if page.evaluate("() => document.getElementById('sd-sidebar').classList.contains('open')") != want_open:
        page.click("#sd-sidebar button.toggle-button")
    page.wait_for_function("o => document.getElementById('sd-sidebar').classList.contains('open') === o", arg=want_open)


def _tab(page, name: str) -> None:
    """Open a tab, through gradio's "More tabs" menu where the tab bar has no room for it (a phone)."""
    tab = page.get_by_role("tab", name=name)
    if tab.count() and tab.is_visible():
        tab.click()
        return
    page.click("button[aria-label='More tabs']")
    page.locator(".overflow-dropdown button", has_text=name).click()


def drive(page, phone: bool, shot=None):
    """Run every tab once and yield (tab, offenders) after each; ``shot(tab)`` names a screenshot."""
    if phone:
        page.wait_for_function("() => !document.getElementById('sd-sidebar').classList.contains('open')")
        _sidebar(page, True)
    set_max_new(page, 24)
    set_number(page, "sd-seed", 3)
    if phone:
        _sidebar(page, False)
    steps = {
        "Generate": lambda: (page.click("#sd-run"), status_has(page, "done")),
        "Step through": lambda: (
            page.click("#sd-step-start"),
            page.wait_for_selector("#sd-step-panel .sd-panel[data-step='1']", timeout=120_000),
            page.click("#sd-step-next"),
            page.wait_for_selector("#sd-step-panel .sd-panel[data-step='2']"),
        ),
        "Race": lambda: (
            page.click("#sd-race"),
            page.wait_for_function(
                "() => /Stopped|speedup/.test((document.querySelector('#sd-race-verdict') || {}).textContent || '')",
                timeout=300_000,
            ),
        ),
        "Teach": lambda: (
            page.wait_for_selector("#sd-theory-plot .js-plotly-plot", timeout=60_000),
            page.click("#sd-mc"),
            page.wait_for_selector("#sd-mc-plot .js-plotly-plot", timeout=60_000),
        ),
        "Chat": lambda: page.wait_for_selector("#sd-chat-unavailable, #sd-chat", timeout=60_000),
    }
    for tab, run in steps.items():
        _tab(page, tab)
        run()
        page.wait_for_timeout(500)  # the last update's layout (plots resize after they draw)
        if shot is not None:
            page.locator(FOCUS[tab]).first.scroll_into_view_if_needed()
            page.screenshot(path=shot(tab))
        yield tab, page.evaluate(OVERFLOW)


def _shot_name(width: int, height: int):
    folder = os.environ.get("SPECDEC_DEMO_IMG")
    if not folder or (width, height) not in SHOTS:
        return None
    return lambda tab: str(Path(folder) / f"demo-{tab.lower().replace(' ', '-')}-{width}x{height}.png")


@pytest.mark.parametrize("width, height", SIZES)
def test_no_element_overflows_in_any_tab(browser, page_url, width, height):
    phone = width < 700
    ctx = browser.new_context(viewport={"width": width, "height": height}, has_touch=phone, is_mobile=phone)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(page_url)
        page.wait_for_selector("#sd-run", timeout=120_000)
        found = {tab: bad for tab, bad in drive(page, phone, _shot_name(width, height)) if bad}
        assert found == {}, found
        assert errors == []
    finally:
        ctx.close()


@pytest.fixture(scope="module")
def smol_url(smol):  # noqa: F811  (tests/test_demo_chat.py's SmolLM2 fixture)
    _, backend = smol
    demo, _ = launch_demo(backend, port=free_port(), prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{demo.server_port}/"
    demo.close()


@pytest.mark.parametrize("width, height", [(1280, 720), (390, 844)])
def test_the_chat_tab_and_a_chat_example_fit_on_smollm2(browser, smol_url, width, height):
    """The Chat tab's own mode and k, a reply with its cost note, and Generate with a chat example
    (its "send as a chat message" box ticked) on a model with a chat template."""
    phone = width < 700
    ctx = browser.new_context(viewport={"width": width, "height": height}, has_touch=phone, is_mobile=phone)
    page = ctx.new_page()
    try:
        page.goto(smol_url)
        page.wait_for_selector("#sd-run", timeout=120_000)
        if phone:
            page.wait_for_function("() => !document.getElementById('sd-sidebar').classList.contains('open')")
            _sidebar(page, True)
        assert page.is_checked("#sd-as-chat input")  # the first example is a chat question
        set_max_new(page, 12)
        if phone:
            _sidebar(page, False)
        page.click("#sd-run")
        status_has(page, "done")
        assert page.locator("#sd-stats .sd-mode-cost").count() == 1
        bad = page.evaluate(OVERFLOW)
        _tab(page, "Chat")
        page.locator("#sd-chat-msg textarea").fill("Why is the sky blue?")
        page.click("#sd-chat-send")
        page.wait_for_selector("#sd-chat .sd-chat-meta", timeout=120_000)
        assert page.locator("#sd-chat .sd-mode-cost").count() == 1
        page.wait_for_timeout(500)
        if os.environ.get("SPECDEC_DEMO_IMG"):
            page.screenshot(path=str(Path(os.environ["SPECDEC_DEMO_IMG"]) / f"demo-chat-smollm2-{width}x{height}.png"))
        assert (bad, page.evaluate(OVERFLOW)) == ([], [])
    finally:
        ctx.close()
