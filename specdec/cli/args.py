"""Command-line pieces every subcommand shares: model and sampling flags, k, and loading the engine.

Contract: importing this loads no torch (``specdec --help`` stays instant). ``add_model_args`` and
``add_sampling_args`` add the shared flag groups; ``k_arg`` is the argparse type for one k and
``k_list_arg`` for a comma list, both through ``specdec.core.config.parse_k`` (the one k rule);
``methods_arg`` checks a comma list of method names against the registry; ``load_engine(args)`` is
the one place a command line becomes an ``Engine`` (``--model``, default SmolLM2-135M; the
command picks its default with ``add_model_args(p, default=...)``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specdec import env
from specdec.catalog.known import BY_NAME as _CATALOGUE
from specdec.catalog.known import DEFAULT as DEFAULT_MODEL
from specdec.core.config import ConfigError, parse_k
from specdec.core.methods import NAMES
from specdec.paths import ASSETS, DEFAULT_PROMPTS  # noqa: F401

MODEL_NAMES = tuple(_CATALOGUE)


def k_arg(value: str):
    try:
        return parse_k(value)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def k_list_arg(value: str) -> list:
    return list(dict.fromkeys(k_arg(part) for part in value.split(",")))


def methods_arg(value: str) -> list[str]:
    names = [m.strip() for m in value.split(",") if m.strip()]
    bad = [m for m in names if m not in NAMES]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"methods must be a comma list of {', '.join(NAMES)}; got {value!r}")
    return list(dict.fromkeys(names))


def add_model_args(p: argparse.ArgumentParser, default: str = DEFAULT_MODEL) -> None:
    """``default``: the command's own default model; ``$SPECDEC_MODEL`` overrides it for every command
    (the test suite sets ``tiny``; a user can pin one for a session)."""
    default = env.get("SPECDEC_MODEL") or default
    g = p.add_argument_group("models (specdec models lists them; docs/models.md)")
    g.add_argument(
        "--model",
        default=None,
        metavar="NAME",
        help=f"a model of the catalogue: {', '.join(MODEL_NAMES)} (default: {default}; $SPECDEC_MODEL "
        "sets another); its draft and trained heads load with it",
    )
    g.set_defaults(default_model=default)
    g.add_argument(
        "--target",
        type=Path,
        default=None,
        help="a target model folder or a .gguf file (converted once into the cache) instead of --model",
    )
    g.add_argument(
        "--draft",
        type=Path,
        default=None,
        help="a draft model folder (default: the model's own draft, if it has one)",
    )
    g.add_argument("--no-draft", action="store_true", help="load no draft model (method draft unavailable)")
    g.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    g.add_argument(
        "--dtype", default="auto", help="float32, float64, bfloat16, float16 or auto (fp32 on CPU, bf16 on CUDA)"
    )
    g.add_argument(
        "--weights",
        default="auto",
        choices=("auto", "fp32", "bf16", "int8", "int4", "q4_1"),
        help="the target's weight format: fp32 (exactly transformers' arithmetic), bf16, int8, int4 "
        "(the GGUF's 4-bit blocks through torch's int4 kernel) or q4_1 (the same blocks through the "
        "project's native kernel, int8 activations, AVX-512 VNNI CPUs); the 4- and 8-bit formats run the "
        "lean row-exact forward, docs/memwall.md. auto (default): for a catalogue model from a GGUF, "
        "the fastest row-exact format measured on this machine, else fp32 (also fp32 where requests "
        "are batched, --max-batch above 1 or any --concurrency: batched rows are not row-exact)",
    )
    g.add_argument(
        "--recalibrate",
        action="store_true",
        help="time the engine's speed paths again at load instead of reading the cached timings "
        "(the cache lives in ~/.cache/specdec; specdec/fast/calibrate.py)",
    )


def add_sampling_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sampling (applied identically to p and q)")
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens (0 = off)")
    g.add_argument("--top-p", type=float, default=1.0, help="nucleus mass in (0, 1] (1 = off)")
    g.add_argument("--seed", type=int, default=None, help="seed for reproducible sampling")


def load_engine(args: argparse.Namespace, progress=None):
    """The engine the flags name, calibrated (specdec/engine/load.py); ``progress`` gets each phase."""
    from specdec.engine.load import engine_from_args

    return engine_from_args(args, progress)
