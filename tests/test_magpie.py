"""Self-distillation data at scale (specdec/training/magpie.py, features.py).

Pure parts on small inputs: the held-out guard, resumable files, length batching. The features
pass against transformers' own unpadded forward on the tiny model. One real run: llama-server
(built by tests/test_llamacpp.py's cache) on SmolLM2's GGUF writes Magpie prompts and greedy
answers, resumes, and the features pass turns them into rows ``chat_train`` reads.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from specdec.training import features, magpie


def test_guard_drops_duplicates_and_anything_sharing_a_run_with_a_heldout_prompt():
    held = ["Write a polite message to my neighbour asking whether they could keep their dog quiet."]
    g = magpie.Guard(held)
    assert not g.allows("write a polite message to my neighbour, asking whether they could keep their dog quiet!")
    assert not g.allows("Please write a polite message to my neighbour asking about parking.")  # 6-word run
    assert g.allows("What is the tallest mountain in Europe?")
    assert not g.allows("what is the tallest mountain in europe")  # a duplicate once normalised
    assert not g.allows("  ...  ")


def test_every_evaluation_and_heldout_prompt_is_guarded():
    texts = magpie.heldout_texts()
    assert len(texts) >= 100  # the shipped sets, the held-out sets, the training set's held-out file
    g = magpie.Guard(texts)
    assert not any(g.allows(t) for t in texts[:50])


def test_a_line_cut_by_a_kill_is_dropped_and_appends_go_on(tmp_path):
    f = tmp_path / "answers.jsonl"
    f.write_text(json.dumps({"id": 0, "completion_ids": [1, 2]}) + "\n" + '{"id": 1, "compl')
    assert magpie.Store(tmp_path).answered == {0: 2} and not f.read_text().endswith("\n")  # a reader
    s = magpie.Store(tmp_path, write=True)
    assert s.answered == {0: 2} and f.read_text().endswith("\n")
    s.add_answer({"id": 1, "completion_ids": [3]})
    assert magpie.Store(tmp_path).answered == {0: 2, 1: 1} and s.tokens() == 3


def test_a_second_writer_on_the_same_folder_is_refused(tmp_path):
    """Two runs appending to one folder gave two prompts one id (2026-12-06, a Ctrl-C that did not
    stop the first run): the folder is now locked while a run holds it."""
    first = magpie.Store(tmp_path, write=True)
    with pytest.raises(SystemExit, match="another self-distillation run"):
        magpie.Store(tmp_path, write=True)
    assert magpie.Store(tmp_path).tokens() == 0  # reading (``meta``) is allowed meanwhile
    first._writer.close()
    magpie.Store(tmp_path, write=True)  # free again once the first run has ended


class _Handle(list):
    def __init__(self, tokens, stop):
        super().__init__(SimpleNamespace(token_ids=[t]) for t in tokens)
        self.stop = stop


def test_an_answer_cut_by_shutdown_or_cancel_is_raised_never_returned():
    from specdec.training import magpie_engines

    def ours(stop):
        return magpie_engines.Ours(SimpleNamespace(submit=lambda r: _Handle([5, 6], stop)), None)

    assert ours("eos").answer([1, 2], 8) == ([5, 6], True)
    assert ours("length").answer([1, 2], 2) == ([5, 6], False)
    for stop in ("shutdown", "cancelled", "error"):
        with pytest.raises(magpie_engines.Interrupted, match=stop):
            ours(stop).answer([1, 2], 8)


def test_one_failing_task_stops_the_others():
    """Ctrl-C or an error in one task: the rest stop taking prompts and the run returns."""
    import threading
    import time

    stop, ran = threading.Event(), []

    def task(gen):
        ran.append(1)
        if len(ran) == 2:
            raise ValueError("boom")
        while not stop.is_set():
            time.sleep(0.01)

    from concurrent.futures import ThreadPoolExecutor

    t0 = time.time()
    with pytest.raises(ValueError, match="boom"):
        magpie._drive(ThreadPoolExecutor(3), task, None, 3, stop)
    assert stop.is_set() and time.time() - t0 < 5
    stop.clear()
    ran.clear()

    def ctrl_c(gen):
        ran.append(1)
        if len(ran) == 2:
            raise KeyboardInterrupt  # what Ctrl-C delivers to the waiting main thread
        while not stop.is_set():
            time.sleep(0.01)

    with pytest.raises(KeyboardInterrupt):
        magpie._drive(ThreadPoolExecutor(3), ctrl_c, None, 3, stop)
    assert stop.is_set()


def test_user_turns_worth_answering():
    assert magpie.good_user_turn("How do volcanoes form?", True)
    assert not magpie.good_user_turn("How do volcanoes form?", False)  # cut by the length limit
    assert not magpie.good_user_turn("Hi", True)
    assert not magpie.good_user_turn("Tell me <|im_start|>assistant", True)


def test_a_features_pass_reads_whole_lines_and_waits_for_another_pass(tmp_path):
    """A pass may run while the data run appends (half a line at the end), and two passes on one
    folder once saved the same rows twice: the second now waits for the first."""
    import threading
    import time

    f = tmp_path / "answers.jsonl"
    f.write_text(json.dumps({"id": 0, "prompt_ids": [1], "completion_ids": [2]}) + "\n" + '{"id": 1, "pro')
    assert [a["id"] for a in features._rows(f)] == [0]
    held, t = threading.Event(), {}

    def first():
        with features.one_pass(tmp_path):
            held.set()
            time.sleep(0.5)
            t["released"] = time.monotonic()

    th = threading.Thread(target=first)
    th.start()
    held.wait(5)
    with features.one_pass(tmp_path):
        t["entered"] = time.monotonic()
    th.join()
    assert t["entered"] >= t["released"]


def test_batches_hold_at_most_batch_tokens_padded_positions():
    rows = [{"id": i, "prompt_ids": [1] * (5 + i), "completion_ids": [2] * 10} for i in range(20)]
    got = features.batches(rows, 64)
    assert sorted(a["id"] for b in got for a in b) == list(range(20))
    for b in got:
        longest = max(len(a["prompt_ids"]) + len(a["completion_ids"]) - 1 for a in b)
        assert len(b) == 1 or len(b) * longest <= 64


def test_hidden_states_of_a_padded_batch_equal_each_row_alone(engine):
    model = engine.target.model
    rows = [
        {"id": 0, "prompt_ids": [5, 6, 7], "completion_ids": [8, 9, 10, 11]},
        {"id": 1, "prompt_ids": [12, 13], "completion_ids": [14, 15]},
    ]
    got = features.hidden_states(model, rows)
    for a, h in zip(rows, got):
        seq = torch.tensor([a["prompt_ids"] + a["completion_ids"][:-1]])
        with torch.inference_mode():
            want = model.model(input_ids=seq).last_hidden_state[0].to(torch.float16)
        assert h.shape == want.shape
        torch.testing.assert_close(h.float(), want.float(), atol=2e-3, rtol=2e-3)


@pytest.mark.slow
def test_magpie_run_on_smollm2_writes_resumes_and_becomes_training_rows(tmp_path):
    from specdec.catalog import known, store
    from specdec.training import selfdistill

    m = known.get("smollm2-135m")
    target = store.require(m)
    tok = selfdistill.load_tokenizer(target)
    prefix = magpie.user_prefix(tok)
    assert prefix.endswith("<|im_start|>user\n")
    shipped = tmp_path / "shipped.jsonl"
    shipped.write_text(json.dumps({"prompt": "Name three colours of the rainbow."}) + "\n")
    folder = tmp_path / "magpie"
    meta = magpie.run(store.gguf_path(m), tok, folder, 120, parallel=2, max_new=24, shipped=shipped, engine="llamacpp")
    assert meta["completion_tokens"] >= 120 and meta["magpie_prompts"] >= 1 and meta["engine"] == "llamacpp"
    prompts = [json.loads(x) for x in (folder / "prompts.jsonl").read_text().splitlines()]
    assert prompts[0]["source"] == "shipped" and len({magpie.normalise(p["prompt"]) for p in prompts}) == len(prompts)
    guard = magpie.Guard(magpie.heldout_texts())
    assert all(guard.allows(p["prompt"]) for p in prompts)  # none touches a held-out set
    kw = dict(parallel=2, max_new=24, shipped=shipped, engine="specdec", target=target)  # resumed by our engine
    again = magpie.run(store.gguf_path(m), tok, folder, 200, **kw)
    assert again["completion_tokens"] >= 200 and again["prompts"] >= meta["prompts"]  # resumed, not restarted
    assert again["engine"] == "specdec" and again["magpie_prompts"] > meta["magpie_prompts"]
    out = tmp_path / "text" / "magpie"
    features.features(target, folder / "answers.jsonl", out, batch_tokens=512)
    rows = selfdistill.load(tmp_path / "text", ["magpie"])
    assert len(rows) == again["answered"]
    r = rows[0]
    assert r["hidden"].shape == (len(r["prompt"]) + len(r["completion"]) - 1, 576)
    assert features.features(target, folder / "answers.jsonl", out)["rows_now"] == 0  # nothing left to do


class _Answers(list):
    completion_tokens = 7


def test_a_magpie_trained_card_records_the_magpie_set_not_the_shipped_prompts():
    """The card of a module trained on ``--data magpie`` names that set and its counts (it once
    said ``prompts_file: train.jsonl`` with every count null)."""
    from specdec.training.chat_export import data_card

    made = {"prompts": 30, "magpie_prompts": 20, "completion_tokens": 900, "stopped_early": True}
    made |= {"max_new_tokens": 160, "engine": "specdec", "tokens_per_s_this_run": 115.4}
    meta = {"magpie": made, "magpie_rows": 25}
    args = (_Answers([1, 2]), _Answers([3]), torch.arange(4))
    got = data_card(SimpleNamespace(data="magpie", prompts="p.jsonl"), meta, *args)["data"]
    assert got["source"].startswith("magpie") and "prompts_file" not in got
    assert (got["prompts"], got["magpie_prompts"], got["answers"], got["completion_tokens"]) == (30, 20, 25, 900)
    assert (got["train_answers"], got["validation_answers"], got["softmax_vocab_subset"]) == (2, 1, 4)
    assert (got["max_new_tokens"], got["engine"], got["generation_tokens_per_s_last_run"]) == (160, "specdec", 115.4)
    shipped = SimpleNamespace(data="shipped", prompts="p.jsonl", max_new=8, gen_batch=2)
    got = data_card(shipped, {"prompts": 3, "completion_tokens": 50}, *args)["data"]
    assert got["prompts_file"] == "p.jsonl" and got["completion_tokens"] == 50 and "source" not in got


def test_the_validation_split_is_by_answer_id_and_stays_when_the_set_grows():
    """Rows load in feature-file order, which changes as a set grows; the split follows each
    answer's id, so a resumed checkpoint's validation answers stay out of training."""
    from specdec.training.chat_data import ChatSet

    def row(i):
        return {"index": i, "prompt": [1, 2], "completion": [3, i % 50 + 4], "hidden": torch.zeros(3, 4)}

    first = [row(i) for i in (5, 11, 0, 23, 3)]
    _, held = ChatSet.build(first, 0, 12)
    grown = [row(i) for i in (40, 35, 2, 23, 47, 11, 5, 0, 3)]  # more rows, another load order
    train, held2 = ChatSet.build(grown, 0, 12)
    assert held.ids[:, 3].tolist() == [15, 27] and held2.ids[:, 3].tolist() == [15, 27, 39, 51]
    assert len(train) == 5
