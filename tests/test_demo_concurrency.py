"""The Teach view's concurrency chart (specdec/demo/concurrency.py) against the shipped bench result."""

from __future__ import annotations

import json

from specdec.demo.concurrency import concurrency_html, latest, stops_paying


def _result(cells: dict[tuple[str, str], dict[int, float]]) -> dict:
    rows = [{"row": "local", "method": "none", "c": 1, "tok_s": 1.0}]
    for (kind, m), by_c in cells.items():
        rows += [{"row": kind, "method": m, "c": c, "tok_s": t} for c, t in by_c.items()]
    return {"rows": rows, "levels": sorted({c for v in cells.values() for c in v}), "prompts": 2, "max_new_tokens": 8}


def test_stops_paying_finds_where_plain_decoding_stays_fastest():
    r = _result({("batch", "none"): {1: 10, 4: 30, 8: 50}, ("batch", "draft"): {1: 20, 4: 25, 8: 40}})
    s = stops_paying(r)
    assert s["from"] == 4
    assert [s["per_c"][c]["plain_wins"] for c in (1, 4, 8)] == [False, True, True]
    assert s["per_c"][1]["best"] == "draft"
    # speculation paying again at the top means it never stopped paying for good
    r = _result({("batch", "none"): {1: 10, 4: 30, 8: 50}, ("batch", "draft"): {1: 20, 4: 25, 8: 60}})
    assert stops_paying(r)["from"] is None


def test_the_chart_draws_every_shipped_row_and_says_where_speculation_stops_paying():
    result = json.loads(latest().read_text(encoding="utf-8"))
    assert result.get("measured_utc"), "the shipped grid drawn is one that says when it was measured"
    page = concurrency_html()
    assert page.count("<svg") == 1 and 'data-chart="concurrency"' in page
    assert 'style="width:100%;height:auto"' in page  # scales to its column
    labels = {r["method"] for r in result["rows"] if r["row"] == "batch"}
    for m in labels:
        assert f">{m}</text>" in page, m
    where = stops_paying(result)["from"]
    assert (f"from c = {where} on" in page) if where is not None else ("still pays" in page)


def test_a_missing_result_gives_a_note_not_an_error(tmp_path):
    page = concurrency_html(tmp_path / "none.json")
    assert "No concurrency measurement" in page and "<svg" not in page


def test_the_latest_grid_is_the_one_measured_last(tmp_path):
    def write(name: str, **extra) -> None:
        (tmp_path / name).write_text(json.dumps({"rows": [], **extra}), encoding="utf-8")

    write("concurrency-cpu.json")
    assert latest(tmp_path).name == "concurrency-cpu.json"  # nothing says when: the default
    write("concurrency-cpu-b.json", measured_utc="2026-12-01T21:00:00Z")
    write("concurrency-cpu-a.json", measured_utc="2026-12-01T22:00:00Z")
    write("concurrency-cpu-z.json")
    (tmp_path / "concurrency-cpu-broken.json").write_text("{", encoding="utf-8")
    assert latest(tmp_path).name == "concurrency-cpu-a.json"
