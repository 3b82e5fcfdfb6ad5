"""The k sweep (specdec/bench/sweep.py, `specdec sweep`), the SVG writer and the edit-prompt builder."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from specdec.bench.sweep import predictions, step_summary
from specdec.core.events import Stats, StepEvent
from specdec.core.theory import expected_tokens_per_position
from specdec.figures.svgplot import DASHED, Series, line_chart, nice_ticks
from specdec.training.edit_prompts import edited_copy, functions

SRC = '''def area(width, height):
    """Area of a rectangle."""
    if width < 0 or height < 0:
        raise ValueError("negative")
    result = width * height
    return result
'''


class FakeResult:
    def __init__(self, sizes: list[int], stats: Stats, ms: float = 1.0) -> None:
        self.events = [
            StepEvent(i, (), stats, {"propose": 0.1 * n, "score": ms, "verify": 0.1}, n) for i, n in enumerate(sizes)
        ]
        self.stats = stats


def test_predictions_use_each_steps_draft_size_and_mean_costs():
    st = Stats(steps=4, drafted=8, accepted_at=[3, 2, 1, 0], tested_at=[4, 3, 2, 1], drafted_at=[4, 2, 1, 1])
    row = {"conditional_alpha_per_position": [0.75, 2 / 3, 0.5, 0.0], "k_mean": 2.0}
    row.update(step_summary(row, [FakeResult([4, 0, 4, 0], st, ms=1.2)]))
    tau_4 = expected_tokens_per_position([0.75, 2 / 3, 0.5, 0.0])
    assert row["tau_per_position"] == pytest.approx((tau_4 + 1.0) / 2)  # two steps drafted nothing
    assert row["alpha_cond"] == pytest.approx(6 / 10) and row["draft_size_hist"] == {"0": 2, "4": 2}
    none = {"conditional_alpha_per_position": [], "k_mean": 0.0}
    none.update(step_summary(none, [FakeResult([0, 0], Stats(), ms=1.0)]))
    out = predictions(row, "draft", 4, none)
    # c = mean propose ms per drafted token / none's mean score ms = (0.2 / 2) / 1.0; r = 1.2 / 1.0
    assert out["c_mean"] == pytest.approx(0.1) and out["r_mean"] == pytest.approx(1.2)
    assert out["predicted_per_position"] == pytest.approx(row["tau_per_position"] / (2.0 * 0.1 + 1.2))
    assert out["predicted_step_cost"] == pytest.approx(row["tau_per_position"] * 1.1 / (1.2 + 0.2 + 0.1))
    lookup = predictions(row, "lookup", 4, none)  # a lookup's cost is per step: c is not divided by k
    assert lookup["c_mean"] == pytest.approx(0.2)
    assert predictions(none, "none", None, none)["predicted_per_position"] is None


def test_svg_is_well_formed_and_draws_every_series():
    assert nice_ticks(0.93, 2.41)[0] <= 0.93 and nice_ticks(0.93, 2.41)[-1] >= 2.41
    svg = line_chart(
        [
            Series("draft measured", [1, 2, 4], [1.1, 1.2, None]),
            Series("draft predicted", [1, 2, 4], [1.0, 1.3, 1.2], dash=DASHED),
        ],
        "t <&>",
        "k",
        "speedup",
    )
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    lines = root.findall(f"{ns}polyline")
    assert len(lines) == 2 and len(lines[0].get("points").split()) == 2  # the None point is skipped
    assert any(t.text == "t <&>" for t in root.iter(f"{ns}text"))
    with pytest.raises(ValueError):
        line_chart([Series("empty", [1], [None])], "t", "x", "y")


def test_edit_prompts_copy_with_the_edit_applied():
    assert [name for name, _ in functions(SRC)] == ["area"]
    header, ref = edited_copy("area", SRC, "rename")
    assert header.startswith("def area_v2(width, height):") and ref.count("area_v2") == 1
    header, ref = edited_copy("area", SRC, "rename-arg")
    assert "width_in" in header and "width_in * height" in ref and "width *" not in ref
    header, ref = edited_copy("area", SRC, "comment")
    assert header.startswith("# Refactored copy of area") and "def area_new(" in header


def test_shipped_edit_prompts_are_well_formed():
    from specdec.models.loading import ASSETS

    records = [json.loads(line) for line in (ASSETS / "prompts" / "edits.jsonl").read_text().splitlines()]
    assert len(records) == 20
    for r in records:
        assert r["prompt"] and r["reference"] and r["edit"] in ("rename", "rename-arg", "comment")
        body = r["prompt"].split("\n\n\n")[0]
        assert r["function"] in body  # the original function is in the prompt: the copy's source


@pytest.mark.slow
def test_sweep_command_writes_json_and_svg(tmp_path):
    out, svg = tmp_path / "s.json", tmp_path / "s.svg"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specdec",
            "sweep",
            "--limit",
            "1",
            "--max-new-tokens",
            "12",
            "--k",
            "1,2",
            "--warmup",
            "0",
            "--json",
            str(out),
            "--svg",
            str(svg),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert set(result["methods"]) == {"none", "draft@k=1", "draft@k=2", "lookup@k=1", "lookup@k=2"}
    d = result["methods"]["draft@k=2"]
    assert d["identical"] == 1 and d["predicted_per_position"] is not None and d["tau_per_position"] >= 1.0
    assert d["draft_size_hist"] and result["config"]["confidence"] == 0.0
    assert ET.fromstring(svg.read_text()).tag.endswith("svg")
    bad = subprocess.run([sys.executable, "-m", "specdec", "sweep", "--k", "1,x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--k" in bad.stderr
