// Minimal VS Code client for `specdec lsp`: starts the server over stdio for Python files,
// forwards every "specdec" setting (initializationOptions at start, didChangeConfiguration later)
// and restarts the server when specdec.command / specdec.args / specdec.telemetry /
// specdec.wait_for_model change (those are read at start) or on the command "specdec: Restart the
// language server".
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

const FORWARDED = ["method", "max_new_tokens", "stop", "temperature", "k", "cache", "lookup_documents",
  "heal", "fim", "multiline", "repeat_limit", "min_confidence", "telemetry", "wait_for_model"];
const AT_START = ["command", "args", "telemetry", "wait_for_model"];
let client;

function settings() {
  const cfg = vscode.workspace.getConfiguration("specdec");
  const out = {};
  for (const key of FORWARDED) {
    const value = cfg.get(key);
    if (value !== undefined) out[key] = value;
  }
  return out;
}

async function start() {
  const cfg = vscode.workspace.getConfiguration("specdec");
  const server = { command: cfg.get("command"), args: cfg.get("args") };
  client = new LanguageClient("specdec", "specdec", server, {
    documentSelector: [{ scheme: "file", language: "python" }, { scheme: "untitled", language: "python" }],
    initializationOptions: settings(),
  });
  client.registerProposedFeatures(); // textDocument/inlineCompletion is a proposed feature in the 9.x client
  await client.start();
}

async function restart() {
  if (client) await client.stop();
  await start();
}

async function activate(context) {
  context.subscriptions.push(vscode.commands.registerCommand("specdec.restart", restart));
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration(async (e) => {
    if (!e.affectsConfiguration("specdec") || !client) return;
    if (AT_START.some((k) => e.affectsConfiguration(`specdec.${k}`))) {
      await restart();
    } else {
      const live = settings();
      delete live.telemetry;
      delete live.wait_for_model;
      client.sendNotification("workspace/didChangeConfiguration", { settings: { specdec: live } });
    }
  }));
  await start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
