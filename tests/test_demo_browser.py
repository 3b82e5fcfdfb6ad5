"""The demo in a real browser: Debian's chromium driven by Playwright (never `playwright install`).

Loads the page, runs a prompt, checks the coloured token spans (the greedy tokens, each once), the
inline SVG charts, Stop, and the Teach view's plotly figure, and that the page logged no console
errors; saves a screenshot in the test's temporary folder (and to $SPECDEC_DEMO_SCREENSHOT when
set, e.g. docs/img/demo.png).
"""

from __future__ import annotations

import os
import re
import shutil

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
sync_api = pytest.importorskip("playwright.sync_api")
from specdec.core.config import GenerateSpec  # noqa: E402
from specdec.core.healing import split_prompt  # noqa: E402
from tests.demo_helpers import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    STATUS,
    fill_prompt,
    set_max_new,
    status_has,
)

pytestmark = pytest.mark.slow
GREEN = "rgb(200, 247, 197)"  # demo_render.KIND_STYLE["accepted"] background


def test_run_a_prompt_in_chromium(page_url, engine, tmp_path):
    """Every wait is on a condition of the page, never on time (this test flaked on a loaded machine)."""
    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1300})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_url)
            page.wait_for_selector("#sd-run", timeout=120_000)
            prompt = page.input_value("#sd-prompt textarea")
            set_max_new(page, 64)
            page.click("#sd-run")
            status_has(page, "done")
            kinds = page.eval_on_selector_all("#sd-tokens span.sd-tok", "els => els.map(e => e.dataset.kind)")
            assert {"accepted", "bonus"} <= set(kinds)
            assert sum(k != "rejected" for k in kinds) == 64  # the slider value reached the engine
            # the page appends each update's new spans (specdec/demo/stream.py): what it shows is the
            # greedy text, every token once, in order
            infos = page.eval_on_selector_all(
                "#sd-tokens span.sd-tok:not([data-kind=rejected])", "els => els.map(e => e.dataset.info)"
            )
            shown = [int(re.search(r"token id (\d+)", i).group(1)) for i in infos]
            at = split_prompt(prompt)  # the page heals the prompt's last token boundary (item 9)
            want = GenerateSpec(method="none", max_new_tokens=64, heal=prompt[at:])
            assert shown == engine.generate(prompt[:at], want).tokens
            colour = page.eval_on_selector(
                "#sd-tokens span.sd-tok[data-kind=accepted]", "e => getComputedStyle(e).backgroundColor"
            )
            assert colour == GREEN
            title = page.get_attribute("#sd-tokens span.sd-tok[data-kind=accepted]", "data-info")
            assert "step" in title and "draft position" in title and "the target's argmax" in title  # T = 0
            assert page.inner_text("#sd-stats [data-stat=tokens]").endswith("64")
            for plot in ("#sd-accept-plot", "#sd-alpha-plot", "#sd-position-plot"):
                size = page.eval_on_selector(f"{plot} svg", "e => e.getBoundingClientRect().width")
                assert size > 50
            shot = tmp_path / "demo.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
            if os.environ.get("SPECDEC_DEMO_SCREENSHOT"):
                shutil.copy(shot, os.environ["SPECDEC_DEMO_SCREENSHOT"])
            fill_prompt(page, "import os\n")  # Stop: a long run (a short prompt leaves ~500 tokens
            set_max_new(page, 500)  # of context), stopped as soon as its first step is on the page
            page.click("#sd-run")
            status_has(page, ": step")
            page.click("#sd-stop")
            status_has(page, "stopped by you|done")
            assert "stopped by you" in page.inner_text(STATUS)
            assert page.text_content("#sd-tokens .sd-prompt") == "import os\n"  # a new run replaced the stream
            assert page.locator("#sd-tokens span.sd-tok").count() < 400
            page.get_by_role("tab", name="Teach").click()
            page.wait_for_selector("#sd-theory-plot .js-plotly-plot", timeout=60_000)
            page.screenshot(path=str(tmp_path / "teach.png"), full_page=True)
        finally:
            browser.close()
    assert errors == []
