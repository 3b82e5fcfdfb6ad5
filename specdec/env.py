"""The environment variables specdec reads, in one table: each ``SPECDEC_*`` variable with its
meaning and default, and the few standard ones (``CXX``, ``XDG_CACHE_HOME``) read beside them.

Contract: no imports of the package, no torch, no I/O at import (``specdec --help`` prints
``help_text()``). ``get(name)`` is the variable's value, or its default when it is unset or empty
(every reader treated an empty value as unset before this table); a name missing from the table
raises ``KeyError``, so a new variable is listed here before it is read. ``on(name)`` is a switch,
false only for ``"0"``; ``raw(name)`` is the value as set, for a run's record of its settings.
specdec/paths.py reads ``SPECDEC_ASSETS`` and ``SPECDEC_CACHE`` itself (it imports nothing of the
package); they are listed here all the same. tests/test_house.py checks that every ``SPECDEC_*``
name in the package is a key of ``VARS``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Var:
    name: str
    default: str | None  # None: unset means "not given"
    meaning: str


def _table(*rows: tuple[str, str | None, str]) -> dict[str, Var]:
    return {name: Var(name, default, meaning) for name, default, meaning in rows}


VARS: dict[str, Var] = _table(
    ("SPECDEC_MODEL", None, "the default model of every command (a catalogue name, e.g. tiny)"),
    ("SPECDEC_MODELS", None, "where installed models live (default <cache>/models)"),
    ("SPECDEC_CACHE", None, "specdec's cache folder (default $XDG_CACHE_HOME/specdec, else ~/.cache/specdec)"),
    ("SPECDEC_ASSETS", None, "the shipped models and prompts (default assets/ of the checkout)"),
    ("SPECDEC_TOKEN", None, "the bearer token `specdec serve` asks of every client (--token wins)"),
    ("SPECDEC_BACKEND_TOKEN", None, "the bearer token sent to --backend URL (--backend-token wins)"),
    ("SPECDEC_NATIVE", "1", "0 turns the native 4-bit kernels off"),
    ("SPECDEC_KERNELS", None, "where built native kernels live (default <cache>/kernels)"),
    ("SPECDEC_KERNELS_MARCH", "native", "-march of the native kernels (x86-64-v3: the AVX2 path; x86-64: reference)"),
    ("SPECDEC_PACKED", "1", "0 turns oneDNN's packed float32 linears off"),
    ("SPECDEC_LLAMACPP", None, "a llama-server binary to use instead of building one"),
    ("SPECDEC_LLAMACPP_ROOT", None, "where llama.cpp is built (default <cache>/llama.cpp)"),
    ("SPECDEC_VLLM_VENV", None, "vLLM's virtual environment (default ~/.cache/specdec/vllm-...)"),
    ("SPECDEC_VLLM_EXTRA", "", "extra arguments for vLLM's server, split on spaces (e.g. GPU settings)"),
    ("SPECDEC_LSP_PROFILE", None, "where the language server's profile writes its stamps (bench/lsp_profile.py)"),
)

# read beside them, not specdec's own
OTHER: dict[str, Var] = _table(
    ("XDG_CACHE_HOME", None, "the user's cache folder (default ~/.cache)"),
    ("CXX", None, "the C++ compiler for native kernels and llama.cpp"),
    ("WS_BENCH_DEBUG", None, "set: the WebSocket bench shows its server's stderr"),
)


def get(name: str) -> str | None:
    """The variable's value, else its default (unset and empty are the same)."""
    var = VARS[name] if name in VARS else OTHER[name]
    return os.environ.get(name) or var.default


def raw(name: str) -> str | None:
    """The variable as set (None when unset), for a run's record of its settings."""
    (VARS[name] if name in VARS else OTHER[name])  # listed, or KeyError
    return os.environ.get(name)


def on(name: str) -> bool:
    """A switch: on unless the variable is ``"0"``."""
    return get(name) != "0"


def help_text() -> str:
    """The ``SPECDEC_*`` variables, one a line, for ``specdec --help``."""
    width = max(len(n) for n in VARS)
    return "environment:\n" + "\n".join(f"  {v.name:{width}}  {v.meaning}" for v in VARS.values())
