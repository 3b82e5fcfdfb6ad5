"""specdec/fast/omp.py: releasing a thread's OpenMP workers really ends them (counted as OS threads)."""

from __future__ import annotations

import os
import time

import pytest
import torch

from specdec.fast import omp


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2, reason="Linux, 2+ CPUs")
def test_release_pool_ends_the_calling_threads_openmp_workers() -> None:
    if "OpenMP" not in torch.__config__.parallel_info() or omp._libgomp() is None:
        pytest.skip("torch here does not run on libgomp")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        x = torch.randn(512, 512)
        (x @ x).sum()  # a parallel region: this thread's pool holds a worker now
        with_pool = _threads()
        assert omp.release_pool() is True
        deadline = time.monotonic() + 2.0
        while _threads() >= with_pool and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _threads() == with_pool - 1  # the worker has exited
        y = x @ x  # a new pool starts at the next parallel region; the result is what it was
        assert torch.equal(y, x @ x) and _threads() == with_pool
    finally:
        torch.set_num_threads(before)
