"""One server per editor, in the configuration texts we ship for editors other than Neovim (Neovim's
snippet is driven for real in tests/test_lsp_nvim.py): the VS Code extension makes one language
client for every Python document and stops it before starting another; docs/lsp.md's Helix
configuration names one server entry for Python. Text checks: no VS Code or Helix runs here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_vscode_starts_one_client_for_every_python_document_and_stops_it_before_another():
    js = (ROOT / "editors" / "vscode" / "extension.js").read_text(encoding="utf-8")
    assert js.count("new LanguageClient(") == 1  # in start(), the only place a server is launched
    start = js[js.index("async function start()") : js.index("async function restart()")]
    assert "new LanguageClient(" in start and 'language: "python"' in start  # one selector: all Python files
    restart = js[js.index("async function restart()") : js.index("async function activate(")]
    assert restart.index("client.stop()") < restart.index("await start()")
    activate = js[js.index("async function activate(") : js.index("function deactivate()")]
    assert activate.count("await start()") == 1 and "onDidOpenTextDocument" not in js  # not per document


def test_helix_configuration_names_one_specdec_server_for_python():
    docs = (ROOT / "docs" / "lsp.md").read_text(encoding="utf-8")
    helix = docs[docs.index("### Helix") :]
    toml = helix[helix.index("```toml\n") + 8 :]
    toml = toml[: toml.index("```")]
    assert toml.count("[language-server.specdec]") == 1
    servers = re.search(r"language-servers = \[(.*?)\]", toml).group(1)
    assert servers.count('"specdec"') == 1
