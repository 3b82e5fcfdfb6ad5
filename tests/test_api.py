"""The public API (specdec/__init__.py): its example runs, its names resolve, ``import specdec``
loads no torch, and building an engine changes no process-wide state (calibration on request)."""

from __future__ import annotations

import doctest
import os
import subprocess
import sys

import torch

import specdec


def test_the_package_docstring_example_runs():
    result = doctest.testmod(specdec, verbose=False)
    assert result.attempted >= 5 and result.failed == 0


def test_every_exported_name_resolves():
    for name in specdec.__all__:
        assert getattr(specdec, name) is not None, name


def test_importing_specdec_loads_no_torch():
    code = "import sys, specdec, specdec.cli.main; assert 'torch' not in sys.modules, 'torch loaded'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_building_an_engine_changes_no_process_wide_state(engine, tmp_path, monkeypatch):
    """A second engine on the same weights: torch's threads, the packed-linear plan and the
    calibration cache are as they were, and it reports no calibration; asking calibrates."""
    from specdec.engine.session import Engine
    from specdec.models import packed

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    threads, plan = torch.get_num_threads(), dict(packed._plan)  # noqa: SLF001 (the module's own state)
    twin = Engine(engine.tokenizer, engine.target.model, engine.draft_model)
    assert torch.get_num_threads() == threads and dict(packed._plan) == plan
    assert os.listdir(tmp_path) == [] and twin.calibration.mode == "off"
    assert twin.calibrate("auto").mode == "auto" and os.listdir(tmp_path) != []
