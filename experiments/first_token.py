"""Time to first token on the real model through the front ends, and the prefill rate (issue 30 goal).

Why: the goal is that every front end answers its first token within 300 ms of a request whose
prompt has up to 100 tokens, after warm-up, and that the prefill rate for longer prompts is
reported beside llama.cpp's. This trial starts a real ``specdec serve`` (a subprocess, the model
the flags name), warms it up, then for each prompt length sends requests with prompts the server
has not seen (each starts with a fresh number, so no kept prefix helps) over the OpenAI
streaming endpoint (the time to the first chunk with text) and over the WebSocket (the time to
the first ``step`` event), and times the engine's prefill in process; medians over ``--repeats``.

Usage: ``python -m experiments.first_token --model smollm2-135m --json out.json``.
Not part of the engine: a measurement to quote in docs/log/.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time

WORDS = "the quick brown fox jumps over a lazy dog while seven wise owls watch from an old oak tree".split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prompt_of(tokenizer, n: int, salt: int) -> list[int]:
    """A prompt of exactly ``n`` tokens, unique per ``salt`` from its first token on."""
    text = f"{salt}: " + " ".join(WORDS[i % len(WORDS)] for i in range(n * 2))
    return tokenizer.encode(text, add_special_tokens=False)[:n]


def wait_up(port: int, proc, timeout: float = 300.0) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}); see its log")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"nothing listens on {port}")


def openai_ttft(base: str, ids: list[int]) -> float:
    from openai import OpenAI

    client = OpenAI(base_url=base, api_key="x")
    t0 = time.perf_counter()
    stream = client.completions.create(model="specdec", prompt=ids, max_tokens=4, temperature=0, stream=True)
    for ch in stream:
        if ch.choices and ch.choices[0].text:
            dt = time.perf_counter() - t0
            for _ in stream:
                pass
            return dt
    raise RuntimeError("no text")


def ws_ttft(url: str, text: str, rid: int) -> float:
    from websockets.sync.client import connect

    with connect(url) as ws:
        json.loads(ws.recv())  # hello
        t0 = time.perf_counter()
        ws.send(json.dumps({"type": "generate", "id": rid, "prompt": text, "max_new_tokens": 4}))
        while True:
            msg = json.loads(ws.recv())
            if msg.get("type") == "step":
                dt = time.perf_counter() - t0
                while msg.get("type") not in ("done", "error"):
                    msg = json.loads(ws.recv())
                return dt
            if msg.get("type") == "error":
                raise RuntimeError(msg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--lengths", default="25,50,100,200,400")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from transformers import AutoTokenizer

    from specdec.catalog.resolve import resolve

    tok = AutoTokenizer.from_pretrained(str(resolve(args.model).target))
    ws_port, oa_port = free_port(), free_port()
    cmd = [sys.executable, "-m", "specdec", "serve", "--model", args.model, "--port", str(ws_port)]
    longest = max(int(x) for x in args.lengths.split(","))
    cmd += ["--openai-port", str(oa_port), "--max-prompt-tokens", str(longest + 8)]
    t_start = time.monotonic()
    log = open(f"/tmp/first_token-{ws_port}.log", "w")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
    report: dict = {"model": args.model, "repeats": args.repeats, "rows": []}
    try:
        wait_up(oa_port, server)
        base, url = f"http://127.0.0.1:{oa_port}/v1", f"ws://127.0.0.1:{ws_port}"
        for salt in range(3):  # warm-up
            openai_ttft(base, prompt_of(tok, min(50, longest), 9000 + salt))
        report["startup_s"] = time.monotonic() - t_start
        salt = 0
        for n in [int(x) for x in args.lengths.split(",")]:
            oa, ws = [], []
            for _ in range(args.repeats):
                salt += 1
                oa.append(openai_ttft(base, prompt_of(tok, n, salt)))
                salt += 1
                ws.append(ws_ttft(url, tok.decode(prompt_of(tok, n, salt)), salt))
            row = {"prompt_tokens": n, "openai_ttft_ms": 1000 * statistics.median(oa)}
            row["ws_ttft_ms"] = 1000 * statistics.median(ws)
            row["prefill_tok_per_s_openai"] = n / statistics.median(oa)
            report["rows"].append(row)
            print(json.dumps(row), flush=True)
    finally:
        server.terminate()
        server.wait(30)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
