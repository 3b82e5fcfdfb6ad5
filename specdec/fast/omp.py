"""Hand back the calling thread's OpenMP workers, so the model thread's team keeps spinning.

Why: with libgomp (PyTorch's OpenMP runtime on Linux) every thread that runs a parallel region
keeps a pool of worker threads of its own. Once the workers of all pools outnumber the CPUs,
libgomp lets every worker spin only briefly before it sleeps, so each parallel region wakes its
workers through the kernel. A front end loads the engine on its main thread (one pool: loading
and calibration run parallel regions there) and decodes on its model thread (a second pool). On
2 cores an 8-row decoding forward on 2 threads then took 13.5-18 ms with about 70 voluntary
context switches per forward, against 9.3-11 ms and none when the main thread had released its
pool first (docs/batching.md, round seven). Backends call ``release_pool`` on the thread that
builds them, before their model thread starts.

Contract: ``release_pool() -> bool`` frees the calling thread's pool through OpenMP 5's
``omp_pause_resource_all(omp_pause_soft)`` (libgomp frees the caller's pool; the thread starts a
new one at its next parallel region) and says whether it did. Where no libgomp is loaded (another
OpenMP runtime, another OS) it does nothing and returns False. It changes where threads wait,
never what they compute.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger("specdec.omp")
OMP_PAUSE_SOFT = 1
_lib: ctypes.CDLL | None | bool = False  # False: not looked up yet; None: no libgomp here


def _libgomp() -> ctypes.CDLL | None:
    global _lib
    if _lib is False:
        _lib = None
        try:
            with open("/proc/self/maps", encoding="utf-8") as maps:
                paths = [line.split()[-1] for line in maps if "libgomp" in line]
            if paths:
                _lib = ctypes.CDLL(paths[0])
                if not hasattr(_lib, "omp_pause_resource_all"):
                    _lib = None
        except OSError:
            _lib = None
    return _lib


def release_pool() -> bool:
    """Free the calling thread's OpenMP worker pool (module docstring); True if it was freed."""
    lib = _libgomp()
    if lib is None:
        return False
    ok = lib.omp_pause_resource_all(OMP_PAUSE_SOFT) == 0
    if not ok:
        log.debug("omp_pause_resource_all refused (inside a parallel region?)")
    return ok
