"""The language server against a raw JSON-RPC client over stdio: lifecycle per the LSP
specification, settings applied one by one, one generation for a completion and an inline
completion of the same document and cursor."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading

import pytest

pytestmark = pytest.mark.slow
DOC = "import os\n\n\ndef read_lines(path):\n    with open(path) as f:\n        return f.read().splitlines()\n\n\ndef "


class Raw:
    """A minimal LSP client: frames messages, collects what the server sends."""

    def __init__(self, *flags: str) -> None:
        cmd = [sys.executable, "-m", "specdec", "lsp", "--log-level", "INFO", *flags]
        self.err = tempfile.TemporaryFile()  # a pipe nobody reads would fill up and block the server
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err)
        self.inbox: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.n = 0
        self.kept: list = []

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                ch = out.read(1)
                if not ch:
                    return
                header += ch
            length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
            self.inbox.put(json.loads(out.read(length)))

    def send(self, method: str, params=None, request: bool = True):
        msg = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.n += 1
            msg["id"] = self.n
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.proc.stdin.flush()
        return msg.get("id")

    def wait(self, pred, timeout: float = 120.0):
        """(the first message, kept or new, that ``pred`` accepts; the ones before it)."""
        seen = []
        while True:
            msg = self.kept.pop(0) if self.kept else self.inbox.get(timeout=timeout)
            if pred(msg):
                self.kept[:0] = seen  # messages skipped stay for a later wait
                return msg, seen
            seen.append(msg)

    def reply(self, msg_id: int):
        return self.wait(lambda m: m.get("id") == msg_id and "method" not in m)[0]

    def start(self, options=None, name: str = "raw") -> None:
        """``initialize`` answered once the model is loaded (``wait_for_model``), then ``initialized``."""
        caps = {"textDocument": {"completion": {"completionItem": {"snippetSupport": True}}}}
        options = {"wait_for_model": True, **(options or {})}
        params = {"processId": None, "rootUri": None, "capabilities": caps, "initializationOptions": options}
        params["clientInfo"] = {"name": name}
        self.reply(self.send("initialize", params))
        self.send("initialized", {}, request=False)

    def open(self, uri: str, text: str) -> None:
        doc = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        self.send("textDocument/didOpen", {"textDocument": doc}, request=False)

    def position(self, uri: str, line: int, char: int) -> dict:
        return {"textDocument": {"uri": uri}, "position": {"line": line, "character": char}}


def _end(raw: Raw) -> tuple[int, str]:
    rc = raw.proc.wait(timeout=120)
    raw.err.seek(0)
    return rc, raw.err.read().decode(errors="replace")


def test_after_shutdown_requests_get_invalid_request_and_exit_is_status_0():
    raw = Raw()
    raw.start()
    assert raw.reply(raw.send("shutdown"))["result"] is None
    got = raw.reply(raw.send("textDocument/completion", raw.position("file:///a.py", 0, 0)))
    assert got["error"]["code"] == -32600
    raw.send("exit", None, request=False)
    assert _end(raw)[0] == 0


def test_exit_without_shutdown_is_status_1_and_stops_a_running_generation():
    raw = Raw("--stop", "block", "--max-new-tokens", "256", "--method", "none")
    raw.start({"telemetry": True, "repeat_limit": 0})
    raw.open("file:///long.py", DOC + "\n")
    params = raw.position("file:///long.py", DOC.count("\n") + 1, 0)
    params["workDoneToken"] = "long"
    raw.send("textDocument/completion", params)
    raw.wait(lambda m: m.get("method") == "$/progress" and m["params"]["value"].get("kind") == "report")
    raw.send("exit", None, request=False)
    rc, err = _end(raw)
    assert rc == 1
    assert "exit: the running generation stops after step" in err  # it did not run to its end


def test_settings_apply_the_valid_ones_and_ignore_other_servers():
    raw = Raw()
    raw.start({"stop": "block", "max_new_tokens": 0, "telemetry": True})  # one bad value
    msg, _ = raw.wait(lambda m: m.get("method") == "window/showMessage")
    assert "max_new_tokens" in msg["params"]["message"] and "telemetry" not in msg["params"]["message"]
    raw.open("file:///s.py", DOC)
    raw.reply(raw.send("textDocument/completion", raw.position("file:///s.py", DOC.count("\n"), 4)))
    raw.wait(lambda m: m.get("method") == "specdec/stats")  # telemetry was applied
    for settings in ({"pylsp": {"plugins": {}}}, {"specdec": None}, {"specdec": {"stop": "line", "k": 99}}):
        raw.send("workspace/didChangeConfiguration", {"settings": settings}, request=False)
    raw.reply(raw.send("textDocument/completion", raw.position("file:///s.py", DOC.count("\n"), 4)))
    msgs = [m["params"]["message"] for m in raw.kept if m.get("method") == "window/showMessage"]
    assert len(msgs) == 1 and "k must" in msgs[0]  # pylsp's section and {"specdec": null}: no error
    raw.reply(raw.send("shutdown"))
    raw.send("exit", None, request=False)
    assert _end(raw)[0] == 0


def test_completion_and_inline_completion_share_one_generation():
    raw = Raw()
    raw.start({"telemetry": True, "cache": False})
    raw.open("file:///both.py", DOC)
    pos = raw.position("file:///both.py", DOC.count("\n"), 4)
    inline = dict(pos, context={"triggerKind": 2})
    a = raw.send("textDocument/completion", pos)
    b = raw.send("textDocument/inlineCompletion", inline)
    ra, rb = raw.reply(a), raw.reply(b)
    items_a, items_b = ra["result"]["items"], rb["result"]["items"]
    assert items_a and items_b and items_a[0]["insertText"] == items_b[0]["insertText"]
    stats, _ = raw.wait(lambda m: m.get("method") == "specdec/stats")
    assert stats["params"]["outcome"] == "done"
    raw.reply(raw.send("shutdown"))
    raw.send("exit", None, request=False)
    rc, _ = _end(raw)
    rest = list(raw.kept)
    while not raw.inbox.empty():
        rest.append(raw.inbox.get())
    assert rc == 0 and not [m for m in rest if m.get("method") == "specdec/stats"]  # one generation


def test_the_confidence_filter_answers_nothing_below_min_confidence_and_reports_it():
    raw = Raw("--method", "none")
    raw.start({"telemetry": True, "cache": False, "min_confidence": 0})
    raw.open("file:///c.py", DOC)
    pos = raw.position("file:///c.py", DOC.count("\n"), 4)
    shown = raw.reply(raw.send("textDocument/completion", pos))["result"]["items"]
    done, _ = raw.wait(lambda m: m.get("method") == "specdec/stats")
    conf = done["params"]["confidence"]
    assert shown and done["params"]["outcome"] == "done" and 0 < conf < 1
    raw.send("workspace/didChangeConfiguration", {"settings": {"min_confidence": min(0.99, conf + 0.01)}}, False)
    quiet = raw.reply(raw.send("textDocument/completion", pos))["result"]["items"]
    filtered, _ = raw.wait(lambda m: m.get("method") == "specdec/stats")
    assert quiet == [] and filtered["params"]["outcome"] == "filtered"
    assert filtered["params"]["confidence"] == pytest.approx(conf, abs=1e-6)  # the same text, the same figure
    raw.reply(raw.send("shutdown"))
    raw.send("exit", None, request=False)
    assert _end(raw)[0] == 0


def test_a_completion_that_is_already_junk_is_stopped_and_filtered():
    """The shipped model loops on a list of zeros; the server stops the run once its text is junk by
    the repetition rule (specdec.lsp.quiet.EarlyJunk), long before the token budget, and answers nothing.
    With the filter off (``repeat_limit`` 0) the same request runs to the budget and is shown."""
    text = "x = [" + "0, " * 20
    raw = Raw("--method", "none")
    raw.start({"telemetry": True, "cache": False, "min_confidence": 0, "max_new_tokens": 48, "heal": False})
    raw.open("file:///z.py", text)
    pos = raw.position("file:///z.py", 0, len(text))
    assert raw.reply(raw.send("textDocument/completion", pos))["result"]["items"] == []
    early, _ = raw.wait(lambda m: m.get("method") == "specdec/stats")
    assert early["params"]["outcome"] == "filtered" and early["params"]["tokens"] < 40
    raw.send("workspace/didChangeConfiguration", {"settings": {"repeat_limit": 0}}, False)
    shown = raw.reply(raw.send("textDocument/completion", pos))["result"]["items"]
    full, _ = raw.wait(lambda m: m.get("method") == "specdec/stats")
    assert shown and full["params"]["outcome"] == "done"
    assert full["params"]["tokens"] >= early["params"]["tokens"] + 10
    assert full["params"]["text"].startswith(early["params"]["text"])  # the same run, stopped early
    raw.reply(raw.send("shutdown"))
    raw.send("exit", None, request=False)
    assert _end(raw)[0] == 0
