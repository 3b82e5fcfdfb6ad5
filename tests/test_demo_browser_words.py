"""Issue 32, item 10 in a real browser (Debian's chromium through Playwright): the legend names every
symbol the stream draws, a rejected token's inspector at temperature 0 says the argmax rule (not
"p=0.000 q=1.000"), and the tokens/s card shows its spread."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
sync_api = pytest.importorskip("playwright.sync_api")
from specdec.demo.layout import launch_demo  # noqa: E402
from specdec.demo.wording import SYMBOLS  # noqa: E402
from tests.demo_helpers import CHROMIUM, CHROMIUM_ARGS, free_port, set_k, set_max_new, set_method, status_has  # noqa: E402

pytestmark = pytest.mark.slow


def test_legend_and_temperature_0_wording_in_chromium(backend):
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is missing: run scripts/system-deps.sh (apt-get install -y chromium)")
    demo, _ = launch_demo(backend, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"http://127.0.0.1:{demo.server_port}/")
            page.wait_for_selector("#sd-run", timeout=120_000)
            legend = page.eval_on_selector_all(".sd-symbol code", "els => els.map(e => e.textContent)")
            assert legend == [sym for sym, _ in SYMBOLS]
            set_method(page, "draft")
            set_k(page, "4")
            set_max_new(page, 64)  # the default prompt shows every fate at temperature 0
            page.click("#sd-run")
            status_has(page, "done")
            page.click("#sd-tokens span.sd-tok[data-kind=rejected]")
            text = page.inner_text("#sd-inspector")
            assert "rejected: the target's argmax is" in text and "p=" not in text
            assert re.search(r"^\(\d+\.\d-\d+\.\d\); whole run", page.inner_text("#sd-stats .sd-spread"))
            browser.close()
    finally:
        demo.close()
