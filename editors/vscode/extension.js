// Minimal VS Code client for `specdec lsp`: starts the server over stdio for Python files and
// forwards the "specdec" settings (initializationOptions at start, didChangeConfiguration later).
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function settings() {
  const cfg = vscode.workspace.getConfiguration("specdec");
  const out = {};
  for (const key of ["method", "max_new_tokens", "stop", "temperature"]) {
    const value = cfg.get(key);
    if (value !== undefined) out[key] = value;
  }
  return out;
}

async function activate(context) {
  const cfg = vscode.workspace.getConfiguration("specdec");
  const server = { command: cfg.get("command"), args: cfg.get("args") };
  client = new LanguageClient("specdec", "specdec", server, {
    documentSelector: [{ scheme: "file", language: "python" }, { scheme: "untitled", language: "python" }],
    initializationOptions: settings(),
  });
  client.registerProposedFeatures(); // textDocument/inlineCompletion is a proposed feature in the 9.x client
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((e) => {
    if (e.affectsConfiguration("specdec") && client) {
      client.sendNotification("workspace/didChangeConfiguration", { settings: { specdec: settings() } });
    }
  }));
  await client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
