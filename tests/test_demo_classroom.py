"""The demo as a class would use it, in Debian's chromium driven by Playwright: several users at once,
Stop in every state, the Race, the Teach view's links, step-through, the inspector, the layouts.

Each test names the defect it guards against (issue 17). No timed assertion on the engine's speed:
where timing matters (long tasks on the main thread) the bound is the page's own responsiveness
budget, measured as each main-thread task's thread time in a browser trace (see LONG_TASK_BOUND_MS).
"""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
sync_api = pytest.importorskip("playwright.sync_api")
from tests.demo_helpers import (  # noqa: E402
    STATUS,
    TRACE_CATEGORIES,
    fill_prompt,
    main_thread_tasks,
    set_k,
    set_max_new,
    set_method,
    set_number,
    status_has,
)

pytestmark = pytest.mark.slow
SHORT = "import os\n"  # a short prompt leaves ~500 tokens of context: a long run


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
        fill_prompt(a, SHORT)
        set_method(a, "none")  # the slowest: A holds the engine for several seconds
        set_max_new(a, 500)
        a.click("#sd-run")
        status_has(a, ": step")
        b.bring_to_front()
        fill_prompt(b, SHORT)
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


LONG_TASK_BOUND_MS = 100  # the bound for main-thread blocking at a time
# Asserted by default on each task's thread time (the CPU the page's own work took), not its wall
# time: on this kind of machine (2 cores, the engine decoding in the same process) a 505-token run's
# longest main-thread task took 35-64 ms (docs/demo.md), but on a loaded machine the same tasks
# stretch in wall time while they wait for a core (a fresh CI machine once saw 53 and 197 ms wall).
# SPECDEC_BROWSER_BOUNDS=0 only measures and prints.
BUSY_150_MS = (
    "() => new Promise(r => setTimeout(() => { const t = performance.now(); "
    "while (performance.now() - t < 150) {} r(1); }, 0))"
)
ASSERT_BOUNDS = os.environ.get("SPECDEC_BROWSER_BOUNDS", "1") != "0"


def test_projector_layout_and_a_512_token_run_keeps_the_page_responsive(browser, page_url):
    """Defects 4 and 5: at 1400x1000 the output started at the bottom edge; a 512-token run blocked
    the main thread up to 351 ms at a time. Stream and stats must be in the first 1400x900 viewport
    while a run streams, and no main-thread task may spend the bound's CPU time (see
    LONG_TASK_BOUND_MS: thread time, read from a browser trace, so that the engine decoding in the
    same 2-core machine does not count as the page's work)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    try:
        page.goto(page_url)
        page.wait_for_selector("#sd-run", timeout=120_000)
        fill_prompt(page, SHORT)
        set_method(page, "none")
        set_max_new(page, 505)  # "import os\n" is a few tokens of the 512-token context
        # the trace sees a task that blocks 150 ms, with its thread time: the measurement below can fail
        browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
        page.evaluate(BUSY_150_MS)
        probe = main_thread_tasks(browser.stop_tracing())
        assert any(wall >= 140 and cpu > 0 for wall, cpu in probe), probe
        browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
        page.click("#sd-run")
        status_has(page, ": step [1-9][0-9]")  # streaming
        for sel in ("#sd-tokens .sd-stream", "#sd-stats"):
            box = page.eval_on_selector(sel, "e => e.getBoundingClientRect().toJSON()")
            assert box["top"] >= 0 and box["bottom"] <= 900, (sel, box)
        assert page.evaluate("() => window.scrollY") == 0
        status_has(page, "done|stopped")
        page.wait_for_function("() => new Promise(r => requestAnimationFrame(() => setTimeout(() => r(true), 0)))")
        run = main_thread_tasks(browser.stop_tracing())
        tokens = page.locator("#sd-tokens span.sd-tok").count()
        print(f"512-token run: {tokens} tokens; main-thread tasks over 50 ms (wall, thread ms): {run}; probe {probe}")
        assert tokens >= 400
        if ASSERT_BOUNDS:
            assert max((cpu for _, cpu in run), default=0.0) < LONG_TASK_BOUND_MS, run
    finally:
        ctx.close()


def test_tap_and_keyboard_open_the_inspector_on_a_phone(browser, page_url):
    """Defect 9: tooltips were hover titles, so tapping a token showed nothing; the phone layout
    must not cover the Run button."""
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
    page = ctx.new_page()
    try:
        page.goto(page_url)
        page.wait_for_selector("#sd-run", timeout=120_000)
        page.wait_for_function("() => !document.getElementById('sd-sidebar').classList.contains('open')")
        hit = page.eval_on_selector(
            "#sd-run",
            "e => { const r = e.getBoundingClientRect(); "
            "return e.contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2)); }",
        )
        assert hit  # nothing covers the Run button
        page.tap("#sd-run")
        status_has(page, "done")
        tok = page.locator("#sd-tokens span.sd-tok[data-kind=accepted]").first
        tok.scroll_into_view_if_needed()
        tok.tap()
        insp = page.locator("#sd-inspector")
        insp.wait_for(state="visible")
        body = insp.inner_text()
        assert "accepted" in body and "step" in body and "the target's argmax" in body and "draft position" in body
        box = insp.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390  # on screen
        page.keyboard.press("Escape")
        insp.wait_for(state="hidden")
        page.locator("#sd-tokens span.sd-tok[data-kind=bonus]").first.focus()
        page.keyboard.press("Enter")
        insp.wait_for(state="visible")
        assert "bonus" in insp.inner_text()
    finally:
        ctx.close()


def test_step_through_shows_p_q_u_and_the_residual_of_the_step_event(browser, page_url, backend):
    """Deliverable: the step-through panel's numbers are the step event's verifier record."""
    from dataclasses import replace

    from specdec.core.config import GenerateSpec, SamplingParams
    from specdec.serving.backend import Request

    prompt = "def fibonacci(n):"
    spec = GenerateSpec(  # a fixed k is the page's "show me" mode: no confidence stop (issue 52)
        method="draft", k=4, max_new_tokens=40, confidence=0.0, sampling=SamplingParams(0.8, seed=3)
    )
    events = list(backend.submit(Request(prompt, replace(spec, verifier_record=True))))  # as the page's run
    want = next(
        i
        for i, ev in enumerate(events)
        if any(n["verdict"] == "rejected" and n["u"] is not None for n in ev.verifier["nodes"])
    )
    ctx, page = _open(browser, page_url)
    try:
        fill_prompt(page, prompt)
        set_method(page, "draft")
        set_k(page, "4")
        set_number(page, "sd-temperature", 0.8)
        set_max_new(page, 40)
        set_number(page, "sd-seed", 3)
        page.get_by_role("tab", name="Step through").click()
        page.click("#sd-step-start")
        page.wait_for_selector("#sd-step-panel .sd-panel[data-step='1']", timeout=120_000)
        for i in range(want):
            page.click("#sd-step-next")
            page.wait_for_selector(f"#sd-step-panel .sd-panel[data-step='{i + 2}']")
        ev = events[want]
        shown = json.loads(page.eval_on_selector("#sd-step-panel .sd-raw", "e => e.textContent"))  # what the page got
        # the same run as the backend's own: same tokens and verdicts (float32 rounding may differ by
        # a few ulps between two runs of one engine: the cache history changes kernel shapes)
        assert [(n["token"], n["verdict"]) for n in shown["nodes"]] == [
            (n["token"], n["verdict"]) for n in ev.verifier["nodes"]
        ]
        for a, b in zip(shown["nodes"], ev.verifier["nodes"]):
            assert a["p"] == pytest.approx(b["p"], rel=1e-5) and a["q"] == pytest.approx(b["q"], rel=1e-5)
            assert (a.get("u") is None) == (b.get("u") is None)
            if a.get("u") is not None:
                assert a["u"] == b["u"]  # the same uniform: the same seeded generator
        rows = page.eval_on_selector_all("#sd-step-panel tr.sd-check", "els => els.map(e => ({...e.dataset}))")
        assert len(rows) == len(shown["nodes"]) == ev.draft_size  # every drafted token, tested or not
        for row, node in zip(rows, shown["nodes"]):
            assert row["verdict"] == node["verdict"] and int(row["token"]) == node["token"]
            assert float(row["p"]) == pytest.approx(node.get("p_test", node["p"]), rel=1e-8)
            assert float(row["q"]) == pytest.approx(node["q"], rel=1e-8)
            if node["verdict"] == "rejected":
                assert float(row["u"]) == pytest.approx(node["u"], rel=1e-8)
                assert float(row["ratio"]) == pytest.approx(node["ratio"], rel=1e-8)
        bars = page.eval_on_selector_all(
            "#sd-step-panel .sd-residual-row .sd-bar", "els => els.map(e => +e.dataset.token)"
        )
        first = next(n for n in shown["nodes"] if n["verdict"] == "rejected")
        assert bars[: len(first["residual"])] == [t["token"] for t in first["residual"]]
        assert page.locator("#sd-step-panel tr.sd-check[data-verdict=rejected]").count() >= 1
        page.click("#sd-step-end")
        page.wait_for_selector(f"#sd-step-panel .sd-panel[data-step='{len(events)}']")
        assert page.errors == []
    finally:
        ctx.close()
