"""The two engines that can write self-distillation text: ours (the batching backend on the
target's q4_1 blocks) and llama.cpp's server with parallel slots. Both answer the same two calls,
so ``magpie.run`` does not know which one it drives.

Contract: an engine has ``user_turn(prefix_ids, seed) -> (text, stopped)`` (a sampled user request
after the template's opening of a user turn, ``T_USER`` / top-p 0.95, reproducible by ``seed``;
``stopped``: it ended at the end of its turn) and ``answer(ids, max_new) -> (completion_ids, eos)``
(greedy). ``ours(target, parallel, threads)`` and ``llamacpp(gguf, folder, parallel, threads,
max_new)`` are context managers that yield one.

Why ours is the default: on SmolLM2 (2 cores, 16 requests at once, 128 tokens each) our batch
backend on q4_1 measured 191 tok/s against llama-server's ~100 with 8 slots (docs/training.md,
7a). Its greedy answers are the target's own at every position (ours, on the weights a user runs;
a batched row is not proven bit-identical to its solo run on 4-bit blocks, docs/memwall.md, which
training data does not need). llama.cpp stays selectable (``--engine llamacpp``).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

T_USER = 1.0  # sampling temperature of the self-written user turns
TOP_P_USER = 0.95
USER_MAX = 120  # tokens: a longer request is cut and dropped (not "stopped")


class Interrupted(RuntimeError):
    """A request ended by the engine's shutdown (Ctrl-C): its partial text must not be kept."""


class Ours:
    def __init__(self, backend, tok) -> None:
        self.backend, self.tok = backend, tok

    def _run(self, ids: list[int], spec) -> tuple[list[int], str | None]:
        from specdec.serving.backend import Request

        handle, out = self.backend.submit(Request(list(ids), spec)), []
        for ev in handle:
            out += ev.token_ids
        if handle.stop not in ("eos", "length", "context"):  # shutdown (Ctrl-C), cancelled
            raise Interrupted(f"request ended by {handle.stop}")
        return out, handle.stop

    def user_turn(self, prefix_ids: list[int], seed: int) -> tuple[str, bool]:
        from specdec.core.config import GenerateSpec, SamplingParams

        sp = SamplingParams(temperature=T_USER, top_p=TOP_P_USER, seed=seed)
        ids, stop = self._run(prefix_ids, GenerateSpec(method="none", max_new_tokens=USER_MAX, sampling=sp))
        return self.tok.decode(ids, skip_special_tokens=True), stop == "eos"

    def answer(self, ids: list[int], max_new: int) -> tuple[list[int], bool]:
        from specdec.core.config import GenerateSpec

        comp, stop = self._run(ids, GenerateSpec(method="none", max_new_tokens=max_new))
        return comp, stop == "eos"


class Llama:
    def __init__(self, url: str, eot: str) -> None:
        self.url, self.eot = url, eot

    def user_turn(self, prefix_ids: list[int], seed: int) -> tuple[str, bool]:
        from specdec.bench.llamacpp import post_json

        body = {"prompt": prefix_ids, "n_predict": USER_MAX, "temperature": T_USER, "top_p": TOP_P_USER}
        body.update({"top_k": 0, "seed": seed, "stop": [self.eot], "cache_prompt": True, "stream": False})
        out = post_json(self.url + "/completion", body, timeout=3600.0)
        return out.get("content", ""), bool(out.get("stop_type") in ("eos", "word") or out.get("stopped_eos"))

    def answer(self, ids: list[int], max_new: int) -> tuple[list[int], bool]:
        from specdec.bench.llamacpp import post_json

        body = {"prompt": ids, "n_predict": max_new, "temperature": 0, "top_k": 1, "return_tokens": True}
        body.update({"cache_prompt": True, "stream": False, "seed": 0})
        out = post_json(self.url + "/completion", body, timeout=3600.0)
        return [int(t) for t in out.get("tokens") or []], out.get("stop_type") == "eos" or bool(out.get("stopped_eos"))


@contextmanager
def ours(target: Path, parallel: int, threads: int):
    """The target from its folder, on q4_1 where the kernels run here (fp32 otherwise), batched."""
    import torch

    from specdec.engine.load import choose_weights
    from specdec.engine.session import Engine
    from specdec.serving.batch import BatchBackend

    torch.set_num_threads(threads)
    engine = Engine.load(target, None, dtype="float32", heads=False, calibration="auto")
    try:
        choose_weights(engine, "q4_1")
    except Exception as e:  # noqa: BLE001 (no q4_1 kernels on this CPU: float32 answers, said)
        print(f"self-distillation: answering in float32 ({e})")
    backend = BatchBackend(engine, max_batch=parallel, max_queue=4 * parallel)
    try:
        yield Ours(backend, engine.tokenizer)
    finally:
        backend.shutdown()


@contextmanager
def llamacpp(gguf: Path, folder: Path, parallel: int, threads: int, max_new: int, eot: str):
    from specdec.bench.llamacpp import LlamaServer
    from specdec.bench.llamacpp_build import server_binary
    from specdec.bench.vllm_rows import free_port

    ctx = parallel * (max_new + 256)
    port = free_port()
    argv = [str(server_binary()), "-m", str(gguf), "-t", str(threads), "-tb", str(threads), "-c", str(ctx)]
    argv += ["-np", str(parallel), "--host", "127.0.0.1", "--port", str(port), "--no-webui"]
    with LlamaServer(argv, folder / "llama-server.log", port) as server:
        yield Llama(server.url, eot)
