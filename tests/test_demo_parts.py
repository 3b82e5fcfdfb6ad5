"""The About panel's "Loaded now" table is read from the loaded objects (issue 52, item 3): layers,
width, parameters and FLOPs ratio of every loaded draft and head, their cards' agreement, and the
target's weight format as the engine runs it. Tiny: against its cards. SmolLM2 (slow): against the
catalogue's shape, with its draft and both heads loaded, fp32 and then Q4_1."""

from __future__ import annotations

import json

import pytest

from specdec.catalog import known
from specdec.demo import model_info as MI
from specdec.demo import parts as P
from specdec.demo.about import about_md
from specdec.paths import ASSETS
from tests.test_demo_chat import smol_dir


def test_the_tiny_models_parts_match_their_cards(backend):
    engine = backend.engine
    got = {p.label: p for p in P.parts(engine)}
    assert set(got) == {"draft model (q)", "Medusa heads", "EAGLE head"}
    card = json.loads((ASSETS / "draft" / "card.json").read_text())
    shape = card["options"]["draft_shape"]
    d = got["draft model (q)"]
    assert (d.layers, d.width, d.parameters) == (str(shape["layers"]), shape["hidden"], card["parameters"])
    assert d.flops == pytest.approx(card["draft_to_target_flops"], rel=0.05)  # the card's own FLOPs figure
    assert f"{card['greedy_agreement']:.0%}" in d.agreement
    medusa = json.loads((ASSETS / "medusa" / "card.json").read_text())
    assert got["Medusa heads"].parameters == medusa["parameters"] and "0.67" in got["Medusa heads"].agreement
    text = about_md(info=MI.loaded(backend))
    assert "Loaded now" in text and "running now:** " in text and "c, the cost ratio" in text
    assert "?" not in text.split("Loaded now")[1].split("c, the cost ratio")[0]  # every figure known


@pytest.mark.slow
@pytest.mark.skipif(smol_dir() is None, reason="SmolLM2 is not installed: specdec models fetch smollm2-135m")
def test_smollm2s_draft_and_heads_are_described_from_what_is_loaded():
    from specdec.engine.session import Engine

    assets = ASSETS / "smollm2-135m"
    engine = Engine.load(smol_dir(), assets / "draft", heads_dir=assets)
    got = {p.label: p for p in P.parts(engine)}
    cfg = json.loads((assets / "draft" / "config.json").read_text())
    d = got["draft model (q)"]
    assert (d.layers, d.width) == (str(cfg["num_hidden_layers"]), cfg["hidden_size"]) and 0 < d.flops < 1
    assert "13%" in d.agreement  # its card's validation agreement, not "0%"
    assert got["EAGLE head"].width == 576 and "0.49" in got["EAGLE head"].agreement
    # Medusa's 4 heads read 8,192 LM-head rows each (their draft vocabulary), not 49,152
    target = P.macs(engine.target.model.config)
    assert got["Medusa heads"].flops == pytest.approx((got["Medusa heads"].parameters + 4 * 8192 * 576) / target)
    assert "30 layers, width 576" in known.get("smollm2-135m").arch  # the target the ratios divide by
    assert "32-bit floats" in P.weights_line(engine)
    engine.set_weights("q4_1")
    assert "Q4_1" in P.weights_line(engine) and "lean" in P.weights_line(engine)
    from specdec.kernels import path

    assert f"integer path `{path()}`" in P.weights_line(engine)  # the kernels' path for this CPU
