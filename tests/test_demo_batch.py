"""The demo on the batching backend: two gradio_client users at once share one batch, each gets
exactly its solo greedy tokens, and the page and the API say how many requests shared the step."""

from __future__ import annotations

import os
import threading

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
gr = pytest.importorskip("gradio")
from gradio_client import Client  # noqa: E402

from specdec.core.config import GenerateSpec  # noqa: E402
from specdec.demo.layout import launch_demo  # noqa: E402
from specdec.demo.render import Transcript, batch_note, transcript_html  # noqa: E402
from specdec.serving.batch import BatchBackend  # noqa: E402
from tests.demo_helpers import free_port, healed_greedy  # noqa: E402

pytestmark = pytest.mark.slow
PROMPTS = ("def fibonacci(n):", "import os\n\n\ndef read_lines(path):")
N = 160  # long enough that the two users' runs overlap


def test_batch_note_words():
    assert batch_note(1) == "alone in the batch"
    assert "2 requests" in batch_note(2) and "1 other user)" in batch_note(2)
    assert "3 other users" in batch_note(4)
    t = Transcript()
    assert "batch" not in transcript_html(t, "done")  # the local backend says nothing about batches
    t.batch_rows = 2
    assert "2 requests in one target forward" in transcript_html(t, "done")


def test_two_users_share_the_batch(engine):
    solo = [healed_greedy(engine, p, N).tokens for p in PROMPTS]  # the demo heals each prompt (item 9)
    backend = BatchBackend(engine, max_batch=2, max_queue=4)
    demo, _ = launch_demo(backend, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        url = f"http://127.0.0.1:{demo.server_port}/"
        out: dict[int, list[dict]] = {}
        clients = [Client(url, verbose=False) for _ in PROMPTS]  # connected before either submits
        go = threading.Barrier(len(PROMPTS))

        def user(i: int) -> None:
            go.wait(60)
            job = clients[i].submit(
                api_name="/generate", prompt=PROMPTS[i], method="none", k="auto", temperature=0.0,
                max_new_tokens=N, seed=0,
            )  # fmt: skip
            out[i] = list(job)

        threads = [threading.Thread(target=user, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(300)
        for i in range(2):
            assert out[i][-1]["done"] is True
            assert out[i][-1]["tokens"] == solo[i]  # exact whatever shares the batch
        rows = [u.get("batch_rows") for i in range(2) for u in out[i]]
        assert 2 in rows  # at least one step was shared, and the API said so
    finally:
        demo.close()
        backend.shutdown(10)


def test_batch_events_carry_batch_not_a_verifier_record(engine):
    """BatchStepEvent's ``batch`` is a keyword field after StepEvent's own (``verifier``)."""
    from specdec.serving.backend import Request

    backend = BatchBackend(engine, max_batch=2, max_queue=4)
    try:
        events = list(backend.submit(Request("def f(", GenerateSpec(method="none", max_new_tokens=4))))
    finally:
        backend.shutdown(10)
    assert events and all(ev.verifier is None and ev.batch["rows"] == 1 for ev in events)
    assert "verifier" not in events[0].to_dict() or events[0].to_dict()["verifier"] is None
