"""``specdec export vllm OUT``: write vLLM-ready model and head folders (``specdec/export/vllm.py``).

Contract: ``add_arguments(parser)`` / ``run(args) -> int``; exits 2 with the export's one-line
reason when a folder does not map one-to-one onto vLLM's parameters (``ExportError``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specdec.cli.args import ASSETS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=["vllm"], help="the serving engine to export for (vllm)")
    p.add_argument("out", type=Path, help="output folder (target/, draft/, medusa/, eagle/, manifest.json)")
    p.add_argument("--assets", type=Path, default=ASSETS, help="the model folders to export (default: assets/)")
    p.add_argument(
        "--model",
        default=None,
        metavar="NAME",
        help="export a catalogue model (specdec models) with its draft and trained heads instead of --assets",
    )


def sources(args: argparse.Namespace):
    """--model NAME: its folders (specdec/catalog/resolve.py); else the --assets folder."""
    if not getattr(args, "model", None):
        return args.assets
    from specdec.catalog.resolve import export_folders, resolve

    return export_folders(resolve(args.model))


def run(args: argparse.Namespace) -> int:
    from specdec.export.vllm import export
    from specdec.export.vllm_maps import ExportError

    try:
        manifest = export(args.out, sources(args))
    except ExportError as e:
        print(f"specdec export: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(manifest, indent=2))
    return 0
