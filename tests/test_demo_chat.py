"""The demo's Chat tab and the page's description of the model it runs (issue 30 deliverable 4;
issue 32 item 11).

Fast: the conversation's messages and its append-only body; the About text, the intro and the Chat
tab's explanation name the loaded model (the shipped tiny one; SmolLM2 described from the
catalogue, with why draft and heads are missing). Slow: SmolLM2 in Debian's chromium through
Playwright, two turns through the Chat tab with their fates, the second turn's tokens equal to
greedy decoding of the conversation, Stop and Clear. Skipped, with the reason, when SmolLM2 is
not installed (``specdec models fetch smollm2-135m``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
from specdec.catalog import known, store  # noqa: E402
from specdec.catalog.resolve import Choice  # noqa: E402
from specdec.demo import chat_view as V  # noqa: E402
from specdec.demo import model_info as MI  # noqa: E402
from specdec.demo.about import about_md  # noqa: E402
from specdec.demo.chat_tab import unavailable_md  # noqa: E402

SMOL = known.get("smollm2-135m")


def smol_dir() -> Path | None:
    """SmolLM2's folder: in the cache the tests use, else in the user's own (tests/conftest.py points
    $SPECDEC_CACHE at a fresh folder for calibration timings, which holds no models)."""
    for hf in (store.hf_dir(SMOL), Path.home() / ".cache" / "specdec" / "models" / SMOL.name / "hf"):
        if (hf / "config.json").is_file():
            return hf
    return None


NOT_INSTALLED = "SmolLM2 is not installed: specdec models fetch smollm2-135m"
needs_smol = pytest.mark.skipif(smol_dir() is None, reason=NOT_INSTALLED)


def test_the_conversation_extends_its_messages_and_its_body_only_grows():
    c = V.Conversation()
    assert c.messages("  ", "hi") == [{"role": "user", "content": "hi"}]  # a blank system prompt: the default
    first = V.user_html("hi <b>") + '<span class="sd-tok">yo</span>'
    c.add("hi <b>", "yo", first)
    assert "&lt;b&gt;" in c.body() and c.body().startswith(first)
    assert c.messages("be brief", "again") == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi <b>"},
        {"role": "assistant", "content": "yo"},
        {"role": "user", "content": "again"},
    ]
    run = c.run
    c.clear()
    assert c.turns == [] and c.body() == "" and c.run != run  # a new stream run: the page redraws
    with pytest.raises(V.ConfigError):
        V.check_message("   ")


def test_the_page_describes_the_tiny_model_when_it_runs_it(backend):
    info = MI.loaded(backend)  # the tests' engine: the shipped target, loaded by folder
    assert info.tiny and info.name == "tiny" and not info.chat
    text = about_md(info=info)
    assert "8.7M" in text and "trained here" in text and "tau 3.6" in text  # the tiny cards, the teaching taus
    assert "SmolLM2" not in MI.intro_line(info)
    why = unavailable_md(info)
    assert "no chat template" in why and "--model smollm2-135m" in why


def _fake_smol_backend():
    """What the demo reads of a backend on SmolLM2 without the draft or heads (no model is loaded)."""
    tokenizer = SimpleNamespace(chat_template="{{ messages }}")
    engine = SimpleNamespace(model=SMOL, model_name=SMOL.name, tokenizer=tokenizer)
    return SimpleNamespace(engine=engine, methods=("none", "lookup", "suffix"))  # no draft, no heads


def test_the_page_describes_smollm2_from_the_catalogue_and_says_why_methods_are_missing():
    info = MI.loaded(_fake_smol_backend())
    assert not info.tiny and info.chat and info.title == "SmolLM2-135M-Instruct"
    text = about_md(info=info)
    for fact in ("SmolLM2-135M-Instruct", "135M", "Apache-2.0", "chat template: yes"):
        assert fact in text
    assert "8.7" not in text and "tau 3.6" not in text  # nothing measured on the tiny model is claimed for it
    missing = MI.unavailable(info)
    assert set(missing) == {"draft", "medusa", "eagle"}
    assert (
        missing["draft"] == "its draft model was not loaded (`--no-draft`)"  # assets/smollm2-135m/draft exists
    )
    assert "no Medusa heads for smollm2-135m" in missing["medusa"]
    assert "Chat" in MI.intro_line(info) and "SmolLM2-135M-Instruct" in MI.intro_line(info)


class _ChatTokenizer:
    chat_template = "plain"

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


class _ChatEngine:
    """Replies "ok." in two plain steps to any prompt and keeps the prompts it was given."""

    methods, context, tokenizer = ("none",), 4096, _ChatTokenizer()

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def stream(self, ids, spec, corpus=(), tenant=None):
        from specdec.core.events import Piece, Stats, StepEvent

        self.prompts.append("".join(map(chr, ids)))
        for i, text in ((1, "ok"), (2, ".")):
            stop = "eos" if i == 2 else None
            yield StepEvent(i, (Piece(i, text, "plain", i, 0),), Stats(), {}, 0, stop)


def test_a_conversation_streams_by_appending_and_each_turn_extends_the_prompt():
    """The stream box appends only what is new within a run (specdec/demo/stream.py): a body that is
    not an extension of the last one shows duplicated tokens (it did: each turn re-added the ones before)."""
    from specdec.demo.chat_tab import ChatHandlers
    from specdec.demo.runs import DemoSession
    from specdec.serving.local import LocalBackend

    engine = _ChatEngine()
    backend = LocalBackend(engine)
    try:
        h, convo, session = ChatHandlers(backend, MI.loaded(backend)), V.Conversation(), DemoSession()
        bodies = []
        for text in ("hello", "again"):
            bodies += [v["body"] for v, _ in h.send(text, "be brief", "none", "auto", 0.0, 1.0, 8, 0, convo, session)]
        assert all(b.startswith(a) for a, b in zip(bodies, bodies[1:]))
        assert bodies[-1] == convo.body() and bodies[-1].count("sd-chat-meta") == 2
        first = "<system>be brief<user>hello<assistant>"
        assert engine.prompts == [first, first + "ok.<user>again<assistant>"]  # the prompt extends
        assert h.clear(convo, session)["body"] == "" and convo.turns == []
    finally:
        backend.shutdown(5)


# -- SmolLM2 in a real browser ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smol():
    """SmolLM2 (no draft, stock paths: calibrating it would cost the test more than it tells) behind
    the in-process backend, as ``specdec demo --model smollm2-135m`` runs it."""
    if smol_dir() is None:
        pytest.skip(NOT_INSTALLED)
    from specdec.engine.session import Engine
    from specdec.serving.local import LocalBackend

    engine = Engine.load(smol_dir(), None, heads=False)
    engine.source = Choice(smol_dir(), None, None, SMOL)
    backend = LocalBackend(engine)
    yield engine, backend
    backend.shutdown(10)


@pytest.fixture(scope="module")
def chat_page(smol):
    sync_api = pytest.importorskip("playwright.sync_api")
    from specdec.demo.layout import launch_demo
    from tests.demo_helpers import CHROMIUM, CHROMIUM_ARGS, free_port

    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is missing: run scripts/system-deps.sh (apt-get install -y chromium)")
    demo, _ = launch_demo(smol[1], port=free_port(), prevent_thread_lock=True, quiet=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.errors = []
        page.on("pageerror", lambda e: page.errors.append(str(e)))
        page.goto(f"http://127.0.0.1:{demo.server_port}/")
        page.wait_for_selector("#sd-run", timeout=120_000)
        yield page
        browser.close()
    demo.close()


def _status_has(page, pattern: str) -> None:
    page.wait_for_function(
        "pat => new RegExp(pat).test((document.querySelector('#sd-chat .sd-status') || {}).textContent || '')",
        arg=pattern,
        timeout=120_000,
    )


def _say(page, text: str, method: str, k: str, enter: bool = False) -> None:
    for elem, value in (("sd-chat-method", method), ("sd-chat-k", k)):
        page.click(f"#{elem} input")
        page.get_by_role("option", name=value, exact=True).click()
    page.locator("#sd-chat-msg textarea").fill(text)
    if enter:
        page.locator("#sd-chat-msg textarea").press("Enter")
    else:
        page.click("#sd-chat-send")


TURNS = """() => {  // per user turn: [kind, token id] of every reply token shown after it
  const out = [];
  for (const el of document.querySelector('#sd-chat .sd-body').children) {
    if (el.classList.contains('sd-chat-user')) out.push([]);
    else if (el.classList.contains('sd-tok'))
      out[out.length - 1].push([el.dataset.kind, +el.dataset.info.match(/token id (\\d+)/)[1]]);
  }
  return out;
}"""


@pytest.mark.slow
@needs_smol
def test_two_turns_with_smollm2_in_chromium(chat_page, smol):
    from specdec.core.config import GenerateSpec
    from specdec.engine.chat import render
    from tests.demo_helpers import set_max_new

    page, (engine, _) = chat_page, smol
    page.click("#sd-about button")
    about = page.text_content("#sd-about-text")
    assert "SmolLM2-135M-Instruct" in about and "Apache-2.0" in about and "8.7M" not in about
    assert "its draft model was not loaded" in page.text_content("#sd-missing-methods")
    assert "not of SmolLM2-135M-Instruct" in _page_values(smol[1])["sd-concurrency"]  # no tiny chart
    set_max_new(page, 40)
    page.get_by_role("tab", name="Chat").click()
    q1, q2 = "What is the capital of France?", "What is the capital of Germany?"
    _say(page, q1, "none", "auto")
    _status_has(page, r"^none: (eos|length)")
    _say(page, q2, "lookup", "4", enter=True)
    _status_has(page, r"^lookup: (eos|length)")
    metas = page.eval_on_selector_all(
        "#sd-chat .sd-chat-meta", "els => els.map(e => [e.dataset.method, e.textContent])"
    )
    assert [m for m, _ in metas] == ["none", "lookup"] and "k 4" in metas[1][1]
    assert all(re.search(r"tau \d\.\d\d · [\d.]+ tok/s", line) for _, line in metas)
    turns = page.evaluate(TURNS)
    assert len(turns) == 2 and {kind for kind, _ in turns[0]} <= {"plain"}
    assert {kind for kind, _ in turns[1]} & {"accepted", "rejected"}  # lookup drafted from the first turn
    spec = GenerateSpec(method="none", max_new_tokens=40)
    a1 = engine.generate(render(engine.tokenizer, [{"role": "user", "content": q1}]), spec)
    assert [t for kind, t in turns[0]] == a1.tokens
    convo = [
        {"role": "user", "content": q1},
        {"role": "assistant", "content": a1.text},
        {"role": "user", "content": q2},
    ]
    a2 = engine.generate(render(engine.tokenizer, convo), spec)
    shown = [t for kind, t in turns[1] if kind != "rejected"]
    assert shown == a2.tokens  # exact: lookup's reply is greedy's
    set_max_new(page, 400)  # Stop, then Clear
    _say(page, "Write a long story about a lighthouse keeper.", "lookup", "auto")
    _status_has(page, r"lookup: step")
    page.click("#sd-chat-stop")
    _status_has(page, r"stopped by you")
    assert len(page.evaluate(TURNS)) == 3
    page.click("#sd-chat-clear")
    page.wait_for_function("() => !document.querySelector('#sd-chat .sd-body').children.length")
    assert page.errors == []


def _page_values(backend) -> dict[str, str]:
    """elem_id -> initial value of every component of the page built on ``backend`` (not launched)."""
    from specdec.demo.layout import build_demo

    comps = build_demo(backend).config["components"]
    return {c["props"]["elem_id"]: c["props"].get("value") for c in comps if c.get("props", {}).get("elem_id")}


def test_on_the_tiny_model_the_chat_tab_explains_and_the_tiny_figures_show(backend):
    values = _page_values(backend)
    assert "no chat template" in values["sd-chat-unavailable"] and "sd-chat-send" not in values
    assert "<svg" in values["sd-concurrency"]  # measured on the tiny models: shown when they run
    assert "tiny" in values["sd-intro"] and "8.7M" in values["sd-about-text"]
