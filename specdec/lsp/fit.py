"""Will a model fit in memory? An estimate from the files alone, before anything loads.

Why: ``--model auto`` once loaded the Qwen pair to measure it on a 2-core host with other jobs and
the kernel killed the server at 16 GB resident, with nothing on stderr and nothing cached
(issue 53). A model's peak resident size while loading follows from its weights' element count,
which the safetensors headers state exactly, so a candidate that cannot fit is refused unloaded.

Contract:
- ``elements(folder)``: the weight elements of every ``*.safetensors`` file in ``folder`` (the
  8-byte header length and the JSON header only; no tensor is read); 0 for a missing folder.
- ``resident(n_elements)`` (pure): the estimated peak resident bytes of a server holding that many
  weight elements: ``BASE_BYTES`` (Python, torch, the tokenizer) plus ``FACTOR`` x their fp32 bytes
  (the loader dequantizes to float32, then builds the 4-bit blocks from them, so for a while two
  copies live; docs/lsp.md has the figures this was set from).
- ``available()``: MemAvailable of /proc/meminfo in bytes, or None where it cannot be read.
- ``allowed(avail, cap)`` (pure): the bytes a candidate may take: ``FRACTION`` of ``avail`` and
  never more than ``cap`` (``cap`` alone when ``avail`` is unknown).
- ``gb(n)``: bytes as ``"2.1 GB"`` for the messages.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

BASE_BYTES = 1_000_000_000
FACTOR = 3.0
FRACTION = 0.5
CAP_BYTES = 3_000_000_000  # issue 53's goal: peak RSS <= 3 GB whatever auto chooses


def elements(folder: Path | None) -> int:
    if folder is None:
        return 0
    total = 0
    for path in sorted(Path(folder).glob("*.safetensors")):
        try:
            with path.open("rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
        except (OSError, ValueError, struct.error):
            continue
        for name, entry in header.items():
            if name != "__metadata__" and isinstance(entry, dict):
                count = 1
                for dim in entry.get("shape", ()):
                    count *= int(dim)
                total += count
    return total


def resident(n_elements: int) -> int:
    return int(BASE_BYTES + FACTOR * 4 * n_elements)


def available(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def allowed(avail: int | None, cap: int = CAP_BYTES) -> int:
    return cap if avail is None else min(cap, int(FRACTION * avail))


def gb(n: int | float) -> str:
    return f"{n / 1e9:.1f} GB"
