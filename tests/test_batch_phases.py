"""tools/batch_phases: the parts of a closed-loop run add up inside its wall, the tokens are the
solo ones, and the timing wrappers leave the backend's methods as they were."""

from __future__ import annotations

import pytest

from specdec.bench import batch_phases
from specdec.bench.run import load_prompts
from specdec.models.batch_target import BatchTarget
from specdec.serving.batch.rows import Row


def test_parts_fit_inside_the_wall_and_the_methods_come_back(engine):
    finish, score = Row.finish, BatchTarget.score
    res = batch_phases.run(engine, load_prompts(batch_phases.DEFAULT_PROMPTS, 3), [1, 2], "none", 8, 1)
    assert Row.finish is finish and BatchTarget.score is score  # the class's own again
    assert [x["c"] for x in res["cells"]] == [1, 2]
    for x in res["cells"]:
        assert x["identical"] and x["tokens"] == 3 * 8 and x["steps"] > 0
        parts = [x[f"{k}_s"] for k in batch_phases.PARTS]
        assert x["score_s"] > 0 and x["finish_s"] > 0 and x["prefill_s"] + x["fold_s"] > 0
        assert sum(parts) <= x["wall_s"] and x["rest_s"] >= 0
        assert x["forward_tok_s"] > x["tok_s"]  # the forwards alone take less than the wall
    assert res["ratios"][0] == {"c": 1, "measured": 1.0, "forwards_only": 1.0}
    table = batch_phases.markdown(res)
    assert table.count("\n| ") == 2 and "c=2:" in table


def test_timed_restores_after_an_error():
    class Thing:
        def f(self):
            raise ValueError("boom")

    thing, acc = Thing(), {"f": 0.0}
    with pytest.raises(ValueError), batch_phases.timed(thing, "f", "f", acc):
        thing.f()
    assert "f" not in vars(thing) and acc["f"] > 0
