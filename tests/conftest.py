"""Shared fixtures: the shipped models, loaded once per test session, and the shipped prompts.

The shipped models are part of the repository (assets/); a missing folder is a failure, not a
skip, so a checkout that lost its weights cannot pass.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

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


# The browser tests' demo page and chromium (module scope: one demo server and one chromium per test
# module). The imports stay inside: a test module sets gradio's environment variables before gradio
# is first imported.
@pytest.fixture(scope="module")
def page_url(backend):
    from specdec.demo.layout import launch_demo
    from tests.demo_helpers import CHROMIUM, free_port

    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is missing: run scripts/system-deps.sh (apt-get install -y chromium)")
    demo, _ = launch_demo(backend, port=free_port(), prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{demo.server_port}/"
    demo.close()


@pytest.fixture(scope="module")
def browser():
    from playwright import sync_api

    from tests.demo_helpers import CHROMIUM, CHROMIUM_ARGS

    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
