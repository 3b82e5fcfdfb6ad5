"""specdec/bench/step_rows.py: the line fit, the cells it times, and one small real run end to end."""

from __future__ import annotations

import json

import pytest

from specdec.bench import step_rows


def test_fit_line_recovers_a_known_line_and_refuses_one_point() -> None:
    pts = [(mb, 2.0 + mb / 10.0) for mb in (40.0, 50.0, 80.0)]  # 10 MB per ms = 10 GB/s
    fit = step_rows.fit_line(pts)
    assert fit["ms_fixed"] == pytest.approx(2.0)
    assert fit["gb_per_s"] == pytest.approx(10.0)  # MB per ms = GB/s
    assert step_rows.fit_line([(40.0, 3.0), (40.0, 3.5)]) is None


def test_cells_pair_every_batch_with_one_chain_of_as_many_tokens() -> None:
    cells = step_rows._cells([1, 8], [32, 256])
    assert cells == [(1, 1, 32), (8, 1, 32), (1, 8, 32), (1, 1, 256), (8, 1, 256), (1, 8, 256)]


def test_a_small_real_run_writes_cells_whose_bytes_grow_with_rows_and_prefix(tmp_path, capsys) -> None:
    out = tmp_path / "rows.json"
    step_rows.main(["--rows", "1,2", "--prefixes", "8,64", "--repeats", "1", "--json", str(out)])
    res = json.loads(out.read_text())
    cells = {(c["rows"], c["q"], c["prefix"]): c for c in res["cells"]}
    assert set(cells) == {(1, 1, 8), (2, 1, 8), (1, 2, 8), (1, 1, 64), (2, 1, 64), (1, 2, 64)}
    assert all(c["ms_median"] > 0 for c in cells.values())
    kv = res["config"]["kv_kb_per_position"] / 1000
    assert cells[(2, 1, 64)]["mb_read"] - cells[(1, 1, 64)]["mb_read"] == pytest.approx(65 * kv)
    assert "MB read" in capsys.readouterr().out
