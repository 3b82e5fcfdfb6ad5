"""Helpers shared by the demo's end-to-end tests."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A free TCP port on the loopback interface (never gradio's default 7860, which others may hold)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CHROMIUM = "/usr/bin/chromium"  # Debian's chromium (never `playwright install`)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STATUS = "#sd-tokens .sd-status"


def status_has(page, pattern: str, timeout: float = 120_000) -> None:
    """Wait until the Generate view's status line matches the regular expression ``pattern``."""
    page.wait_for_function(
        "pat => new RegExp(pat).test((document.querySelector('" + STATUS + "') || {}).textContent || '')",
        arg=pattern,
        timeout=timeout,
    )


def set_max_new(page, n: int) -> None:
    set_number(page, "sd-max-new", n)


def fill_prompt(page, text: str) -> None:
    """Type the prompt and wait until the box holds it (a slow page may still be hydrating)."""
    box = page.locator("#sd-prompt textarea")
    box.fill(text)
    page.wait_for_function("t => document.querySelector('#sd-prompt textarea').value === t", arg=text)


def set_method(page, name: str) -> None:
    """Pick a method in the Generate view's dropdown (its options read "name: description")."""
    import re

    page.click("#sd-method input")
    page.get_by_role("option", name=re.compile(f"^{re.escape(name)}:")).click()


def set_number(page, elem_id: str, value) -> None:
    """Type into the number box of a gradio Slider or Number with this elem_id, and wait until the
    box holds the value (conditions, not sleeps: the page may be slow on a loaded machine)."""
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")
    page.wait_for_function(
        "([id, v]) => +document.querySelector('#' + id + ' input[type=number]').value === v", arg=[elem_id, value]
    )


def set_k(page, k: str) -> None:
    page.click("#sd-k input")
    page.get_by_role("option", name=k, exact=True).click()


TRACE_CATEGORIES = ["toplevel", "disabled-by-default-devtools.timeline"]


def main_thread_tasks(trace: bytes, min_ms: float = 50.0) -> list[tuple[float, float]]:
    """(wall ms, thread ms) of every task of at least ``min_ms`` wall time that a page's main thread
    (``CrRendererMain``) ran in a Chromium trace (``browser.start_tracing(categories=TRACE_CATEGORIES)``).
    Wall time is what a long task is (PerformanceObserver's ``duration``); thread time is the CPU the
    task itself used, which does not stretch when other processes on the machine take the cores."""
    import json

    events = json.loads(trace)["traceEvents"]
    main = {
        (e["pid"], e["tid"])
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name" and e["args"].get("name") == "CrRendererMain"
    }
    return [
        (e["dur"] / 1000, e.get("tdur", e["dur"]) / 1000)
        for e in events
        if e.get("ph") == "X" and e.get("name") == "RunTask" and (e["pid"], e["tid"]) in main
        if e["dur"] >= min_ms * 1000
    ]


def healed_greedy(engine, prompt: str, max_new_tokens: int):
    """The engine's plain greedy run of ``prompt`` healed as the demo heals it (item 9: the prompt
    backed off to its last token boundary, the continuation made to spell the rest)."""
    from specdec.core.config import GenerateSpec
    from specdec.core.healing import split_prompt

    at = split_prompt(prompt)
    return engine.generate(prompt[:at], GenerateSpec(method="none", max_new_tokens=max_new_tokens, heal=prompt[at:]))
