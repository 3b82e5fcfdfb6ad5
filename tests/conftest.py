"""Shared fixtures: the shipped models, loaded once per test session, and the shipped prompts.

The shipped models are part of the repository (assets/); a missing folder is a failure, not a
skip, so a checkout that lost its weights cannot pass.
"""

from __future__ import annotations

import json
import os
import tempfile

import pytest
import torch

from specdec.bench.llamacpp_build import root as llamacpp_root
from specdec.catalog.store import models_root
from specdec.kernels import root as kernels_root
from specdec.models.loading import ASSETS, DEFAULT_DRAFT, DEFAULT_TARGET

torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
# the installed real models (specdec models fetch) stay where they are; the CLI's default model is the
# tiny shipped one here, so tests that want SmolLM2 say --model smollm2-135m
os.environ.setdefault("SPECDEC_MODELS", str(models_root()))
os.environ.setdefault("SPECDEC_MODEL", "tiny")
# so does llama.cpp's build (specdec/bench/llamacpp_build.py: 15 minutes, once per machine)
os.environ.setdefault("SPECDEC_LLAMACPP_ROOT", str(llamacpp_root()))
# and the native kernels, compiled once per machine, source and torch (specdec/kernels/)
os.environ.setdefault("SPECDEC_KERNELS", str(kernels_root()))
# calibration caches its timings per machine (specdec/fast/calibrate.py): the suite keeps its own, fresh
os.environ.setdefault("SPECDEC_CACHE", tempfile.mkdtemp(prefix="specdec-test-cache-"))


@pytest.fixture(scope="session")
def engine():
    from specdec.engine.session import Engine

    return Engine.load(DEFAULT_TARGET, DEFAULT_DRAFT, calibration="auto")  # as the CLI loads it


@pytest.fixture(scope="session")
def backend(engine):
    """The in-process backend over the session's engine (the demo's tests share it)."""
    from specdec.serving.local import LocalBackend

    b = LocalBackend(engine)
    yield b
    b.shutdown(10)


@pytest.fixture(scope="session")
def prompts() -> list[str]:
    path = ASSETS / "prompts" / "code.jsonl"
    return [json.loads(line)["prompt"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
