"""A bounded CPU-bound competitor for ``specdec bench --contention``.

Contract: ``busy(limit_s)`` is a context manager that starts one child process spinning a pure
Python loop (one core, no memory, no I/O) and stops it on exit; the child also ends on its own
after ``limit_s`` seconds, so a killed bench never leaves it running. ``running(proc)`` says whether
it is still alive (the bench records it). Why: a second busy process on a small machine is the
usual case on a laptop or a shared box, and an engine that spin-waits on OpenMP threads degrades
far worse than stock there (issue 14); the bench must measure that, not hide it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

LOOP = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


@contextmanager
def busy(limit_s: float = 3600.0) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, "-c", LOOP.format(limit=float(limit_s))])
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def running(proc: subprocess.Popen) -> bool:
    return proc.poll() is None
