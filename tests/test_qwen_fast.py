"""Qwen2 on the fast path: q/k/v biases through the native row-exact forward on 4-bit blocks, and a
draft from a GGUF on its target's format (issue 38). On Qwen2.5-Coder-0.5B-Instruct, which the
README's test command installs (the 1.5B target is measured by hand: docs/bench.md).

The claims: on q4_1 (and int4) the verifier's rows of a Qwen2 model equal its plain steps bit for
bit, chains and trees, biases included; lookup emits exactly plain decoding's tokens; the engine
puts a catalogue draft from a GGUF on its target's 4-bit format and leaves any other draft alone;
a draft that is the target itself, on the same format and its shipped reduced vocabulary
(FR-Spec), drafts the target's own tokens.
"""

from __future__ import annotations

import pytest

from specdec.core.config import GenerateSpec, SamplingParams
from tests.test_quant import _check

pytestmark = pytest.mark.slow
CODE = 'def is_prime(n: int) -> bool:\n    """Return True when n is a prime number."""\n    '


def _spec(method: str, n: int = 24, k: int = 4) -> GenerateSpec:
    return GenerateSpec(method=method, max_new_tokens=n, k=k, sampling=SamplingParams(0.0))


@pytest.fixture(scope="module")
def pair():
    """Qwen 0.5B in float32 as the target and, loaded again, as its own draft."""
    from specdec.catalog import known, store
    from specdec.engine.load import load_engine

    folder = store.require(known.get("qwen2.5-coder-0.5b"))
    return load_engine(folder, folder, "cpu", "float32", None, heads=None)


def test_qwen2_verifier_rows_equal_plain_steps_bit_for_bit(pair):
    offered = [f for f in ("int4", "q4_1") if f in pair.target.weight_formats()]
    assert "int4" in offered  # torch's int4 kernel runs on every CPU here; q4_1 needs VNNI
    ids = pair.encode(CODE * 3)
    for fmt in offered:
        _check(pair, fmt, ids[:40])


def test_the_engine_puts_a_gguf_draft_on_its_targets_format_and_no_other(pair):
    from specdec.catalog import known, store
    from specdec.catalog.resolve import Choice
    from specdec.engine.load import draft_weights

    fmt = "q4_1" if "q4_1" in pair.target.weight_formats() else "int4"
    folder = store.require(known.get("qwen2.5-coder-0.5b"))
    prop = pair.proposer("draft")
    assert draft_weights(pair, Choice(folder, folder, None, known.get("qwen2.5-coder-0.5b")), fmt) == "fp32"
    assert draft_weights(pair, Choice(folder, folder, None, known.get("smollm2-135m")), fmt) == "fp32"
    assert prop.weights == "fp32"  # no catalogue draft named: the draft stays as loaded
    pair.set_weights(fmt)
    try:
        # the 1.5B's entry names the 0.5B as its draft, and the draft folder is the 0.5B's
        assert draft_weights(pair, Choice(folder, folder, None, known.get("qwen2.5-coder-1.5b")), fmt) == fmt
        assert prop.weights == fmt and prop.paths == ("lean",)
        assert prop.vocab_ids is not None and len(prop.vocab_ids) < 40000  # its shipped draft vocabulary
        ref = pair.generate(CODE, _spec("none"))
        for method in ("lookup", "draft"):
            out = pair.generate(CODE, _spec(method))
            assert out.tokens == ref.tokens, method
        out = pair.generate(CODE, _spec("draft"))
        assert out.stats.drafted > 0 and out.stats.accepted / out.stats.drafted > 0.9  # the target drafting itself
    finally:
        prop.set_weights("fp32")
        pair.set_weights("fp32")
