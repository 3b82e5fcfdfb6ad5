"""The demo end to end on the shipped models: the app launched on a free loopback port and driven by
gradio_client (/generate streaming, bad input, cancel, two clients at once), and the page handlers
(Stop, Race, Teach) called as gradio calls them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
gr = pytest.importorskip("gradio")
from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

from specdec.demo.examples import example_prompts  # noqa: E402
from specdec.demo.handlers import Handlers  # noqa: E402
from specdec.demo.layout import launch_demo  # noqa: E402
from specdec.demo.runs import DemoSession  # noqa: E402
from tests.demo_helpers import free_port, healed_greedy  # noqa: E402

pytestmark = pytest.mark.slow
PROMPT = example_prompts()[0][1]
MIXED = "def fibonacci(n):"  # the draft is both accepted and rejected here at temperature 0


@pytest.fixture(scope="module")
def app_url(backend):
    demo, _ = launch_demo(backend, port=free_port(), prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{demo.server_port}/"
    demo.close()


@pytest.fixture(scope="module")
def client(app_url):
    return Client(app_url, verbose=False)


def _stream(client: Client, **kw) -> list[dict]:
    job = client.submit(api_name="/generate", **kw)
    updates = list(job)
    assert job.status().success
    return updates


def test_generate_streams_fates_and_matches_healed_greedy(client, engine):
    updates = _stream(client, prompt=MIXED, method="draft", k=4, temperature=0.0, max_new_tokens=40, seed=0)
    assert len(updates) >= 2 and updates[-1]["done"] is True and not any(u["done"] for u in updates[:-1])
    final = updates[-1]
    seen = set().union(*({p["kind"] for p in u["pieces"]} for u in updates))
    assert {p["kind"] for p in final["pieces"]} == seen  # the last update carries every piece
    assert {"accepted", "rejected", "recovered", "bonus"} <= seen
    assert all({"text", "kind", "step", "position", "p", "q"} <= set(p) for p in final["pieces"])
    assert final["text"] == "".join(p["text"] for p in final["pieces"] if p["kind"] != "rejected")
    ref = healed_greedy(engine, MIXED, 40)  # the demo heals the prompt's trailing ":" (item 9)
    assert final["tokens"] == ref.tokens and final["text"] == ref.text
    assert final["stats"]["tau"] > 1.0 and final["stats"]["target_forwards"] < len(ref.tokens)


def test_lookup_through_the_api_equals_the_baseline(client, engine):
    out = client.predict(
        prompt="import os\nimport sys\n", method="lookup", k=4, max_new_tokens=24, api_name="/generate"
    )
    ref = healed_greedy(engine, "import os\nimport sys\n", 24)
    assert out["tokens"] == ref.tokens and out["done"]


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"prompt": ""}, "prompt is empty"),
        ({"prompt": "x = 1", "k": 99}, "k must be"),
        ({"prompt": "x = 1", "method": "medusa-not-here"}, "not available"),
        ({"prompt": "x = 1", "temperature": -1.0}, "temperature"),
        ({"prompt": "x = 1", "max_new_tokens": 0}, "max_new_tokens"),
        ({"prompt": "x = 1", "max_new_tokens": 10**6}, "max_new_tokens"),
    ],
)
def test_bad_input_is_an_api_error_and_the_app_keeps_serving(client, bad, message):
    with pytest.raises(AppError, match=message):
        client.predict(api_name="/generate", **bad)
    assert client.predict(prompt="x = 1\n", method="none", max_new_tokens=3, api_name="/generate")["done"]


def test_invalid_input_is_one_warning_line_not_a_traceback(client, capfd, caplog):
    """Defect 10: every invalid input wrote a 36-line traceback to the server log."""
    caplog.set_level("WARNING", logger="specdec.demo")
    with pytest.raises(AppError, match="k must be"):
        client.predict(api_name="/generate", prompt="x = 1", k=99)
    time.sleep(0.5)  # the server thread writes its log after answering
    assert "Traceback" not in capfd.readouterr().err
    refused = [r.getMessage() for r in caplog.records if r.name == "specdec.demo"]
    assert len(refused) == 1 and refused[0].startswith("refused: k must be")


def test_cancel_closes_the_stream_and_frees_the_engine(client, engine, backend, monkeypatch):
    seen = {"events": 0, "finished": False, "closed": False}
    original = engine.stream

    def watched(prompt, spec, corpus=(), tenant=None):  # the real stream, observed: how far it ran, if closed
        gen = original(prompt, spec, corpus, tenant)
        try:
            for ev in gen:
                seen["events"] += 1
                seen["finished"] = ev.stop is not None
                yield ev
        finally:
            gen.close()
            seen["closed"] = True

    monkeypatch.setattr(engine, "stream", watched)
    job = client.submit(prompt="x = 1\n", method="none", max_new_tokens=500, api_name="/generate")
    for _ in job:
        break  # the first update arrived: the engine is mid-generation
    job.cancel()
    deadline = time.monotonic() + 20
    while not seen["closed"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen["closed"] and not seen["finished"] and seen["events"] < 500
    assert wait_idle(backend)
    assert client.predict(prompt="x = 1\n", method="none", max_new_tokens=3, api_name="/generate")["done"]


def test_two_clients_at_once_get_their_own_results(app_url, engine):
    prompts = ["def add(a, b):\n", "class Point:\n"]
    results: dict[int, dict] = {}

    def go(i: int) -> None:
        c = Client(app_url, verbose=False)
        results[i] = c.predict(prompt=prompts[i], method="draft", k=3, max_new_tokens=24, api_name="/generate")

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for i, p in enumerate(prompts):
        assert results[i]["tokens"] == healed_greedy(engine, p, 24).tokens


# -- the page's handlers, called as gradio calls them ---------------------------------------------
def wait_idle(backend, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not backend.idle and time.monotonic() < deadline:
        time.sleep(0.01)
    return backend.idle


def test_stop_ends_the_generation_between_steps(backend):
    h, session = Handlers(backend), DemoSession()
    updates = h.generate(PROMPT, "none", "auto", 0.0, 1.0, 512, 0, session)
    first = next(updates)
    assert "running" in first[0]["status"]  # the stream's value (specdec/demo/stream.py)
    h.stop(session)
    *_, last = updates
    assert "stopped by you" in last[0]["status"] and wait_idle(backend)
    assert last[0]["body"].count('data-kind="plain"') < 100 and last[0]["run"] == first[0]["run"]


def test_race_at_temperature_zero_says_identical(backend):
    """k fixed at 4: `auto` k may choose plain decoding on a machine where the draft does not pay."""
    h, session = Handlers(backend), DemoSession()
    *_, (left, right, verdict) = h.race(PROMPT, "draft", 4, 0.0, 1.0, 24, 0, 2, session)
    assert "identical, token for token (24 tokens)" in verdict and "speedup" in verdict
    assert left["head"].count("sd-race-meta") == 1 and 'data-kind="accepted"' in right["body"]
    assert session.runs and session.runs[-1].speedup is not None
    fig, text = h.theory(0.7, 4, 0.1, session)
    assert any(tr.name == "your races (speedup)" for tr in fig.data)


def test_page_errors_are_gradio_errors(backend):
    h, session = Handlers(backend), DemoSession()
    with pytest.raises(gr.Error, match="prompt is empty"):
        next(h.generate("", "draft", "auto", 0.0, 1.0, 8, 0, session))
    with pytest.raises(gr.Error, match="comma-separated"):
        next(h.monte_carlo("1, x", "1, 1", 100, 0))


def test_specdec_demo_prints_the_url_and_serves(tmp_path):
    import urllib.request

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "specdec", "demo", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url, lines, early = None, [], None
        for line in proc.stdout:  # models load first, each phase said (stderr), then the URL is printed
            lines.append(line)
            if early is None and "loading tiny" in line:  # while loading, the URL answers with the phases
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
                    early = r.read().decode()
            if "ready: serving at http://" in line:
                url = line[line.index("http://") :].split()[0]
                break
        assert url == f"http://127.0.0.1:{port}/"
        assert early is not None and "is loading the model" in early and "loading tiny" in early
        said = "".join(lines)  # issue 52, item 5: start-up is never silent
        for phase in ("starting", "loading", "calibrating", "serving at"):
            assert "specdec demo [" in said and phase in said, said
        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.status == 200 and "specdec" in r.read().decode()
    finally:
        proc.terminate()
        proc.wait(30)


def test_specdec_demo_with_a_missing_model_is_a_one_line_error(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "specdec", "demo", "--target", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "target model folder not found" in out.stderr
    assert "Traceback" not in out.stderr
