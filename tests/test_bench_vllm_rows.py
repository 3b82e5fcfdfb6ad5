"""vLLM's rows of the concurrency bench (specdec/bench/vllm_rows.py) on the real vLLM server: every
request's greedy tokens equal the engine's solo run, and the table, chart and Teach view show the
row. Runs on the "none" server of vllm_helpers.Servers (kept for tests/test_vllm.py's first case)."""

from __future__ import annotations

import pytest
from vllm_helpers import vllm_servers  # noqa: F401 - the fixture

from specdec.core.config import GenerateSpec

pytestmark = pytest.mark.slow


def test_vllm_rows_check_identity_and_show_in_the_table(vllm_servers, engine, prompts):  # noqa: F811
    from specdec.bench.concurrency import markdown
    from specdec.bench.vllm_rows import vllm_cells
    from specdec.demo.concurrency import stops_paying
    from specdec.figures.concurrency import chart

    ids = [engine.encode(p) for p in sorted(prompts, key=len)[:3]]
    ref = [engine.generate(i, GenerateSpec(method="none", max_new_tokens=6)).tokens for i in ids]
    url = vllm_servers.url("none").removesuffix("/v1")
    rows = vllm_cells(url, ids, [1, 2], 6, ref, "none")
    assert [(r["row"], r["method"], r["c"]) for r in rows] == [("vllm", "none", 1), ("vllm", "none", 2)]
    assert all(r["identical"] and r["tokens"] == 18 and r["ttft_p50_ms"] > 0 for r in rows)
    wrong = vllm_cells(url, ids[:1], [1], 6, [ref[0][:-1] + [ref[0][-1] + 1]], "none")
    assert not wrong[0]["identical"]  # the check can fail
    result = {"levels": [1, 2], "rows": [{"row": "local", "method": "none", "c": 1, "tok_s": 1.0}, *rows]}
    assert "| vLLM none |" in markdown(result) and ">vLLM none</text>" in chart(result)
    assert stops_paying(result)["per_c"][2]["best"] == "vLLM none"
