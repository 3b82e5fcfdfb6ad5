"""specdec/bench/contention.py: the bench's busy competitor starts, runs, stops on exit, and ends itself
after its limit (so a killed bench never leaves it spinning). No timing is asserted."""

from __future__ import annotations

import time

from specdec.bench.contention import busy, running
from specdec.cli.bench_args import add_bench_parser


def test_busy_runs_inside_the_block_and_stops_after() -> None:
    with busy(60) as proc:
        time.sleep(0.2)
        assert running(proc)
    assert not running(proc) and proc.returncode is not None


def test_busy_ends_itself_after_its_limit() -> None:
    with busy(0.1) as proc:
        proc.wait(timeout=30)
        assert not running(proc) and proc.returncode == 0


def test_the_bench_takes_the_flag() -> None:
    import argparse

    sub = argparse.ArgumentParser().add_subparsers()
    p = add_bench_parser(sub)
    assert p.parse_args(["--contention"]).contention and not p.parse_args([]).contention
