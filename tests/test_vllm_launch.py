"""Pure logic around vLLM, without vLLM: the speculative configs and command line of ``specdec vllm
serve``, the reading of vLLM's chunks and per-step metrics into StepEvents and Stats, the demo's
backend line, and scripts/vllm-env.sh being a no-op on a venv whose stamp matches."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from specdec.core.events import Stats
from specdec.demo.backend import backend_note
from specdec.export.vllm_launch import server_argv, speculative_config
from specdec.serving.backend import Capabilities
from specdec.serving.remote_stream import stats_from_metrics, vllm_step

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"target": "/x/target", "draft": "/x/draft", "eagle": "/x/eagle"}


def test_speculative_configs() -> None:
    assert speculative_config("none", None, FOLDERS) is None
    assert speculative_config("lookup", 3, FOLDERS) == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_max": 3,
        "prompt_lookup_min": 1,
    }
    assert speculative_config("draft", None, FOLDERS) == {
        "method": "draft_model",
        "model": "/x/draft",
        "num_speculative_tokens": 4,
    }
    assert speculative_config("eagle", 2, FOLDERS)["method"] == "eagle"
    with pytest.raises(ValueError):
        speculative_config("beam", 2, FOLDERS)


def test_server_argv_binds_loopback_and_names_the_method() -> None:
    argv = server_argv(Path("/venv/bin/python"), FOLDERS, "eagle", 3, port=9000, tensor_parallel=1)
    assert argv[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    i = argv.index("--served-model-name")
    assert argv[i + 1 : i + 3] == ["specdec", "specdec-vllm-eagle-k3"]
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and "--per-request-spec-decode-metrics" in argv
    plain = server_argv(Path("p"), FOLDERS, "none")
    assert "--speculative-config" not in plain and "--per-request-spec-decode-metrics" not in plain


def test_vllm_chunks_become_steps() -> None:
    stats = Stats()
    first = vllm_step(1, [5], ["a"], 4, "eagle", stats, plain_first=True)
    assert [p.kind for p in first.pieces] == ["plain"]
    full = vllm_step(2, [1, 2, 3, 4, 9], list("bcdef"), 4, "eagle", stats)
    assert [p.kind for p in full.pieces] == ["accepted"] * 4 + ["bonus"]
    part = vllm_step(3, [1, 7], list("gh"), 4, "eagle", stats)
    assert [(p.kind, p.position) for p in part.pieces] == [("accepted", 1), ("recovered", 2)]
    assert part.stats.accepted_at == [2, 1, 1, 1] and part.stats.drafted_at == [2, 2, 2, 2]
    plain = vllm_step(1, [1, 2], ["x", "y"], None, "none", Stats())
    assert [p.kind for p in plain.pieces] == ["plain", "plain"]


def test_stats_from_vllm_metrics() -> None:
    m = {"per_step_accepted": [4, 0, 2], "per_step_drafted": [4, 4, 4]}
    s = stats_from_metrics(m, emitted=10, elapsed_s=1.0)
    assert s.accepted_at == [2, 2, 1, 1] and s.drafted_at == [3, 3, 3, 3] and s.tested_at == [3, 2, 2, 1]
    assert s.target_forwards == 4 and s.tau == 2.5


def test_demo_says_what_a_remote_backend_cannot_show() -> None:
    class Remote:
        capabilities = Capabilities(fates=False, trees=False, corpus=False)

        def describe(self):
            return "vllm server at http://h:1: whatever"

    note = backend_note(Remote())
    assert "vllm server at http" in note and "rejected draft tokens" in note and "token trees" in note

    class Local:
        capabilities = Capabilities()

    assert "embedded engine" in backend_note(Local())


def test_vllm_env_is_a_no_op_when_the_stamp_matches(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("#!/bin/sh\nexit 1\n")  # would fail if anything ran it
    (venv / "bin" / "python").chmod(0o755)
    script = ROOT / "scripts" / "vllm-env.sh"
    stamp_cmd = 'cat "$1/pyproject.toml" "$1"/specdec_vllm_plugin/*.py | sha256sum | cut -c1-16'
    stamp = subprocess.run(["sh", "-c", stamp_cmd, "sh", str(ROOT / "vllm_plugin")], capture_output=True, text=True)
    (venv / ".specdec-plugin").write_text(stamp.stdout)
    env = dict(os.environ, SPECDEC_VLLM_VENV=str(venv))
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == str(venv) and not out.stderr
    bad = subprocess.run(["bash", str(script), "--frobnicate"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "unknown argument" in bad.stderr
