"""vLLM (its own venv) on the real default model, SmolLM2-135M-Instruct, exported by `specdec export
vllm --model smollm2-135m` with what was trained here for it: every method vLLM runs gives
transformers' greedy tokens on chat prompts (fp32). One vLLM start per method."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from vllm_helpers import K, Servers, free_port, need_venv

from specdec.catalog.resolve import export_folders, resolve
from specdec.core.config import GenerateSpec
from specdec.export.vllm import export
from specdec.serving.backend import Request
from specdec.serving.remote import RemoteBackend

pytestmark = pytest.mark.slow
N_NEW = 24
QUESTIONS = ["Explain in a short paragraph why the sky is blue.", "List three uses of a paperclip."]


@pytest.fixture(scope="module")
def smol_servers():
    need_venv()
    out = Path(tempfile.mkdtemp(prefix="specdec-vllm-smol-"))
    # its own EAGLE port: the tiny models' session-wide vLLM servers may still hold EAGLE_PORT
    servers = Servers(export(out, export_folders(resolve("smollm2-135m")))["folders"], out, eagle_port=free_port())
    yield servers
    servers.stop()
    shutil.rmtree(out / "target", ignore_errors=True)


@pytest.fixture(scope="module")
def smol_refs():
    """(prompt ids, transformers' greedy continuation) per question, on the converted fp32 folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = resolve("smollm2-135m").target
    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    out = []
    for q in QUESTIONS:
        text = tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
        ids = tok.encode(text, add_special_tokens=False)
        with torch.no_grad():
            seq = model.generate(torch.tensor([ids]), max_new_tokens=N_NEW, do_sample=False)[0].tolist()
        out.append((ids, seq[len(ids) :]))
    return out


def methods() -> list[str]:
    """none, lookup and what was trained here and maps onto vLLM (tied Medusa heads do not yet:
    specdec/export/vllm.py says so in the manifest)."""
    import json

    folders = export_folders(resolve("smollm2-135m"))
    out = ["none", "lookup"]
    for m in ("draft", "medusa", "eagle"):
        config = Path(folders[m]) / "config.json" if folders[m] else None
        if config is not None and config.is_file() and not json.loads(config.read_text()).get("tied"):
            out.append(m)
    return out


@pytest.mark.parametrize("method", methods())
def test_vllm_on_smollm2_gives_transformers_greedy_tokens(smol_servers, smol_refs, method) -> None:
    remote = RemoteBackend(smol_servers.url(method), resolve("smollm2-135m").target).wait_ready()
    assert remote.methods == (method,)
    for ids, want in smol_refs:
        h = remote.submit(Request(ids, GenerateSpec(method=method, k=K, max_new_tokens=N_NEW)))
        got = [t for ev in h for t in ev.token_ids]
        assert got == want, f"{method}: vLLM differs from transformers' greedy"
