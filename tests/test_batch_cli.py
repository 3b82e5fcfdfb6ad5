"""``--max-batch`` / ``--kv-tokens`` on every front end, and the one rule that builds the backend."""

from __future__ import annotations

import argparse

import pytest

from specdec.cli.batch_args import check_batch_args, make_backend
from specdec.cli.main import build_parser
from specdec.core.config import ConfigError


@pytest.mark.parametrize("cmd", ["serve", "demo", "lsp"])
def test_every_front_end_takes_the_batch_flags(cmd):
    args = build_parser().parse_args([cmd, "--max-batch", "4", "--kv-tokens", "4096"])
    assert (args.max_batch, args.kv_tokens) == (4, 4096)
    default = 8 if cmd == "serve" else 1  # a server batches by default; the others run the single-request loop
    assert build_parser().parse_args([cmd]).max_batch == default


def test_bad_values_are_clear_errors():
    with pytest.raises(ConfigError, match="--max-batch"):
        check_batch_args(argparse.Namespace(max_batch=0, kv_tokens=None))
    with pytest.raises(ConfigError, match="--kv-tokens"):
        check_batch_args(argparse.Namespace(max_batch=2, kv_tokens=0))


def test_batch_of_one_is_the_local_backend_and_more_is_the_batch(engine):
    from specdec.serving.batch import BatchBackend
    from specdec.serving.local import LocalBackend

    one = make_backend(argparse.Namespace(max_batch=1, kv_tokens=None), engine)
    many = make_backend(argparse.Namespace(max_batch=3, kv_tokens=None), engine)
    try:
        assert isinstance(one, LocalBackend) and isinstance(many, BatchBackend)
        assert many.limits.max_batch == 3
        with pytest.raises(ConfigError, match="kv-tokens"):
            make_backend(argparse.Namespace(max_batch=3, kv_tokens=5), engine)
    finally:
        one.shutdown(5)
        many.shutdown(5)


def test_the_concurrency_bench_runs_and_checks_identity(engine, prompts):
    from specdec.bench.concurrency import markdown, run_concurrency, table
    from specdec.figures.concurrency import chart

    result = run_concurrency(engine, prompts[:3], [1, 2], ["none", "lookup"], 4, hf=False)
    rows = {(r["row"], r["method"], r["c"]) for r in result["rows"]}
    assert ("local", "none", 1) in rows and ("batch", "lookup", 2) in rows and ("load", "lookup", 2) in rows
    assert all(r["identical"] for r in result["rows"])
    assert all(r["tokens"] == 12 for r in result["rows"])
    assert "lookup" in table(result) and "| none |" in markdown(result) and chart(result).startswith("<svg")
    again = run_concurrency(engine, prompts[:3], [2], ["none", "lookup"], 4, hf=False, repeats=3)
    cells = [r for r in again["rows"] if r["row"] != "local"]
    assert again["repeats"] == 3 and len(cells) == 3 and all(r["identical"] for r in again["rows"])
    for r in cells:  # the kept run is the median of its three
        assert len(r["tok_s_runs"]) == 3 and r["tok_s"] == sorted(r["tok_s_runs"])[1]
    local = next(r for r in again["rows"] if r["row"] == "local")  # the reference, measured every round too
    assert again["rows"][0] is local and local["tok_s"] == sorted(local["tok_s_runs"])[1]
