"""One row of docs/memwall.md's table per ISA: the 4-bit plain step and the verifier's cost on the
kernels' path this process built, for a catalogue model.

Contract: ``row(model, threads)`` loads ``model`` (no draft, no heads, nothing calibrated), puts its
target on "q4_1" through the native forward, and returns ``{"path", "model", "bytes_per_step",
"bandwidth_gbs", "limit_tok_s", "step_ms", "tok_s", "share", "r": {k: verify of k + 1 rows over one
row}}`` (each time the best of a few samples after a 65-token prefill, calibrate_weights.measure's
protocol). ``python -m specdec.bench.isa_table`` prints it as JSON; run it once per build
(``SPECDEC_KERNELS_MARCH=x86-64-v3`` gives the AVX2 path on an AVX-512 machine, ``x86-64`` the
reference) with nothing else running, and the rows compare paths on one machine.
"""

from __future__ import annotations

import argparse
import json


def row(model: str = "smollm2-135m", threads: int = 2) -> dict:
    import torch

    from specdec.bench.memwall import bandwidth_gbs
    from specdec.catalog.resolve import resolve
    from specdec.engine.session import Engine
    from specdec.fast import calibrate_weights as W
    from specdec.kernels import path

    torch.set_num_threads(threads)
    engine = Engine.load(resolve(model).target, None, "cpu", "float32", heads=False)
    t = W.measure(engine, ["q4_1"])["q4_1"]  # the default rows forward: native
    bw = bandwidth_gbs()
    limit = bw * 1e9 / t["bytes"]
    tok_s = 1e6 / t["step_us"]
    return {
        "path": path(),
        "model": model,
        "bytes_per_step": t["bytes"],
        "bandwidth_gbs": round(bw, 1),
        "limit_tok_s": round(limit, 1),
        "step_ms": round(t["step_us"] / 1000, 2),
        "tok_s": round(tok_s, 1),
        "share": round(tok_s / limit, 3),
        "r": {k: round(v / t["step_us"], 2) for k, v in t["verify_us"].items()},
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    print(json.dumps(row(a.model, a.threads)))


if __name__ == "__main__":
    main()
