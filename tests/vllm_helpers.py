"""Shared by the vLLM tests: the exported folders, one vLLM server at a time (started on demand,
kept while the next test wants the same method: every start costs about a minute on a CPU), and
the skip when the vLLM venv is absent (the README's test command creates it: scripts/vllm-env.sh).
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from specdec.export.vllm import export
from specdec.export.vllm_launch import VllmServer, server_argv, server_env, venv_path
from specdec.models.loading import ASSETS

K = 4  # vLLM's num_speculative_tokens in these tests: chains of 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


EAGLE_PORT = free_port()  # fixed at import: the LSP fixture's command line needs the URL before the server runs


def need_venv():
    py = venv_path() / "bin" / "python"
    if not py.exists():
        pytest.skip(f"no vLLM venv at {venv_path()}: run scripts/vllm-env.sh (the README's test command does)")
    return py


class Servers:
    def __init__(self, folders: dict, logs, eagle_port: int | None = None) -> None:
        """``eagle_port``: where the EAGLE server listens (default EAGLE_PORT, which the LSP fixture
        needs in advance; another set of servers in the same session must use another port)."""
        self.folders, self.logs = folders, logs
        self.eagle_port = eagle_port or EAGLE_PORT
        self.method, self.server = None, None

    def url(self, method: str) -> str:
        if self.method != method:
            self.stop()
            port = self.eagle_port if method == "eagle" else free_port()
            argv = server_argv(need_venv(), self.folders, method, K, port=port)
            self.server = VllmServer(argv, server_env(), self.logs / f"vllm-{method}.log", "127.0.0.1", port)
            self.server.start(timeout=900)
            self.method = method
        return self.server.url + "/v1"

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        self.method, self.server = None, None


@pytest.fixture(scope="session")
def vllm_servers():
    need_venv()
    # not tmp_path_factory: pytest prunes old basetemp folders, and a concurrent pytest run would
    # delete the folders a running vLLM server reads
    out = Path(tempfile.mkdtemp(prefix="specdec-vllm-"))
    servers = Servers(export(out, ASSETS)["folders"], out)
    yield servers
    servers.stop()
    for folder in servers.folders.values():  # the logs stay (vllm-METHOD.log: KV capacity, start-up)
        shutil.rmtree(folder, ignore_errors=True)
