"""Closed-loop clients: ``clients`` threads share ``n`` jobs, each taking the next unserved one.

Contract: ``closed_loop(n, clients, job) -> wall seconds``: calls ``job(i)`` once for every
i in 0..n-1 from ``clients`` threads (a client takes the next index as soon as its previous job
returned, so at most ``clients`` jobs run at once) and returns the wall time of the whole run.
``job`` stores its own results (by index). Used by the concurrency bench
(``specdec/bench/concurrency.py``) and the remote backend's concurrent row (``specdec/bench/remote.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def closed_loop(n: int, clients: int, job: Callable[[int], None]) -> float:
    nxt, lock = iter(range(n)), threading.Lock()

    def client() -> None:
        while True:
            with lock:
                i = next(nxt, None)
            if i is None:
                return
            job(i)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - t0
