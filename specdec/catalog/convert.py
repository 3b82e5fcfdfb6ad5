"""GGUF file -> Hugging Face folder, once: transformers dequantizes the file (``gguf_file=``), the
result is saved as an ordinary folder the engine loads in a second.

Contract: ``convert(gguf, out, dtype)`` writes ``out`` atomically (``out.partial`` renamed when
complete; a leftover partial folder is removed and redone). Needs the ``gguf`` and ``accelerate``
packages (install dependencies of specdec). transformers refuses to save a GGUF-loaded model until
its quantizer and ``quantization_config`` are cleared (docs/models.md): the weights are already
plain tensors by then. fp32 keeps the dequantized values exactly; bf16 halves the folder.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path


def convert(gguf: Path, out: Path, dtype: str = "float32", log=None) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log = log or (lambda msg: print(msg, file=sys.stderr))  # stdout stays the command's (--json)
    gguf, out = Path(gguf), Path(out)
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    t0 = time.perf_counter()
    log(f"converting {gguf.name} to a Hugging Face folder ({dtype}; dequantizing, about a minute)")
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=getattr(torch, dtype))
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(partial))
    tok.save_pretrained(str(partial))
    for f in partial.iterdir():
        f.chmod(0o644)  # save_pretrained writes safetensors 0600
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    log(f"converted in {time.perf_counter() - t0:.0f} s: {out}")
    return out
