"""The batch's thread plan (specdec/fast/threads.py): pure logic, with made-up forward times."""

from __future__ import annotations

import torch

from specdec.fast import threads as T
from specdec.fast.threads import ThreadPlan, bucket, key


def _run(plan: ThreadPlan, tokens: int, ms_of: dict[int, float], n: int, rows: int = 1) -> list[int]:
    used = []
    for _ in range(n):
        plan.apply(tokens, rows)
        used.append(torch.get_num_threads())
        plan.observe(ms_of[used[-1]] * tokens)
    return used


def test_buckets_are_powers_of_two():
    assert [bucket(t) for t in (1, 2, 3, 4, 7, 8, 15, 16, 300)] == [1, 2, 2, 4, 4, 8, 8, 16, 256]
    assert key(1, 9) == "1x8" and key(9, 9) == "8x8" and key(3, 300) == "2x256"


def test_a_bucket_learns_the_faster_count_and_keeps_probing():
    before = torch.get_num_threads()
    try:
        plan = ThreadPlan.learn(solo=1, counts=[1, 2])
        used = _run(plan, 8, {1: 3.0, 2: 2.0}, 64)
        assert used[: 2 * T.WARM].count(1) == T.WARM  # both counts tried first, in turn
        assert plan.table == {"1x8": 2}
        later = used[2 * T.WARM :]
        assert later.count(2) > 0.8 * len(later) and 1 in later  # the faster one, and a probe of the other
        assert plan.samples == {"1x8": 64}
        # another bucket learns its own: here one thread is faster
        _run(plan, 2, {1: 1.0, 2: 1.5}, 32)
        assert plan.table == {"1x2": 1, "1x8": 2}
        # the machine changes: the probes notice, the bucket moves
        _run(plan, 8, {1: 1.0, 2: 4.0}, 200)
        assert plan.table["1x8"] == 1
    finally:
        torch.set_num_threads(before)


def test_within_the_margin_fewer_threads_win_and_one_token_keeps_the_solo_count():
    before = torch.get_num_threads()
    try:
        plan = ThreadPlan.learn(solo=1, counts=[1, 2])
        _run(plan, 16, {1: 1.02, 2: 1.0}, 40)
        assert plan.table == {"1x16": 1}
        assert plan.threads(1) == 1 and ThreadPlan.learn(solo=2, counts=[1, 2]).threads(1) == 2
        plan.apply(1)
        plan.observe(5.0)  # a batch of one is never recorded
        assert plan.samples == {"1x16": 40}
    finally:
        torch.set_num_threads(before)


def test_a_fixed_plan_is_a_table():
    plan = ThreadPlan({2: 2}, solo=1)
    assert [plan.threads(t) for t in (1, 2, 9)] == [1, 2, 2] and plan.table == {2: 2}
    plan.apply(4)
    plan.observe(3.0)
    assert plan.samples == {}


def test_rows_and_tokens_learn_apart():
    """8 rows of one token and one row's chain of 8 tokens read different bytes
    (specdec/bench/step_rows.py): each bucket keeps its own choice."""
    before = torch.get_num_threads()
    try:
        plan = ThreadPlan.learn(solo=1, counts=[1, 2])
        _run(plan, 8, {1: 1.0, 2: 1.5}, 40, rows=1)  # a lone chain: one thread is faster
        _run(plan, 8, {1: 3.0, 2: 2.0}, 40, rows=8)  # eight rows: two threads are faster
        assert plan.table == {"1x8": 1, "8x8": 2}
        assert plan.threads(8, 1) == 1 and plan.threads(9, 8) == 2
    finally:
        torch.set_num_threads(before)
