"""Field by field: the same OpenAI requests to ``specdec serve`` and to vLLM's server on the same model.

Usage: ``python -m experiments.openai_vs_vllm OURS_URL VLLM_URL`` (base URLs ending in ``/v1``; both
serving the same target under the model name ``specdec``, e.g. ``specdec serve --model tiny`` and
``specdec vllm serve --method none``; run ours with ``--method none`` too, so streams chunk alike).
For each request it prints every field path whose presence or value differs (ids and timestamps
aside; our ``specdec`` extension and vLLM's own extras listed separately), then ``same`` or the
differences. Why: "compatible" is checked against the server clients are written for, not against
our reading of the OpenAI reference.
"""

from __future__ import annotations

import json
import math
import sys
import urllib.request

PROMPT = "def fibonacci(n):\n"
REQUESTS = {
    "greedy, logprobs 2": {"prompt": PROMPT, "max_tokens": 8, "temperature": 0, "logprobs": 2},
    "stop (list)": {"prompt": PROMPT, "max_tokens": 24, "temperature": 0, "stop": ["none_of", "zzz"]},
    "echo": {"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "echo": True},
    "n 2, seeded": {"prompt": PROMPT, "max_tokens": 6, "temperature": 1.0, "seed": 7, "n": 2},
    "stream, usage": {
        "prompt": PROMPT,
        "max_tokens": 4,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    },
}
IGNORED = {"id", "created", "system_fingerprint", "model"}


def post(base: str, body: dict):
    req = urllib.request.Request(base + "/completions", json.dumps({"model": "specdec"} | body).encode())
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=300) as resp:
        if not body.get("stream"):
            return json.load(resp)
        lines = [ln[6:] for ln in resp.read().decode().split("\n\n") if ln.startswith("data: ")]
    return [json.loads(ln) for ln in lines if ln != "[DONE]"]


def flatten(x, path: str = "") -> dict[str, object]:
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            if k not in IGNORED:
                out |= flatten(v, f"{path}.{k}" if path else k)
        return out
    if isinstance(x, list) and x and all(isinstance(v, (dict, list)) for v in x):
        out = {}
        for i, v in enumerate(x):
            out |= flatten(v, f"{path}[{i}]")
        return out
    return {path: x}


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, abs_tol=1e-3)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return all(same(a[k], b[k]) for k in a)
    return a == b


def compare(ours, theirs) -> list[str]:
    a, b = flatten(ours), flatten(theirs)
    lines = []
    for key in sorted(a.keys() | b.keys()):
        if "specdec" in key or "token_ids" in key:
            continue
        if key not in a:
            lines.append(f"  only vLLM: {key} = {json.dumps(b[key])[:100]}")
        elif key not in b:
            lines.append(f"  only ours: {key} = {json.dumps(a[key])[:100]}")
        elif not same(a[key], b[key]):
            lines.append(f"  differs:  {key}: ours {json.dumps(a[key])[:80]} / vLLM {json.dumps(b[key])[:80]}")
    return lines


def main(ours: str, theirs: str) -> int:
    for name, body in REQUESTS.items():
        diff = compare(post(ours, body), post(theirs, body))
        print(f"{name}: {'same' if not diff else ''}")
        print("\n".join(diff)) if diff else None
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
