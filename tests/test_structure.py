"""The house plan, checked (docs/architecture.md): no import cycle between files or between sibling
folders, the layers import only downwards, no module imports another module's private names,
argparse lives only in specdec/cli, the install ships one top-level package, and one registry entry
is all a new method needs, for the batch too."""

from __future__ import annotations

import ast
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("specdec", "experiments")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def import_graph() -> dict[str, set[str]]:
    """module -> project modules it imports, at any depth of the file (lazy imports count too;
    imports under ``if TYPE_CHECKING:`` do not, as they never run)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(n)
            for b in ast.walk(tree)
            if isinstance(b, ast.If) and ast.unparse(b.test) == "TYPE_CHECKING"
            for n in ast.walk(b)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:  # annotations only, never imported at run time
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                while t and t not in mods:  # `import engine.x.y` names a module; an attribute import its module
                    t = t.rpartition(".")[0]
                if t and t != name:
                    graph[name].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_files():
    graph = import_graph()
    assert len(graph) > 150 and "specdec.serving.backend" in graph["specdec.serving.local"]  # it sees real edges
    assert cycles(graph) == []


# The folders of specdec/ from the bottom up (docs/architecture.md): a folder imports only folders
# listed before it, and ``paths`` (no imports of its own). Front ends sit beside each other; only
# the CLI imports bench, training and export. Every folder is listed (test_every_folder_has_a_layer).
LAYERS: dict[str, set[str]] = {
    "core": set(),
    "figures": set(),
    "catalog": set(),
    "kernels": set(),  # native sources and their build; only ``paths`` of the package
    "models": {"core", "kernels"},
    "fast": {"core", "models"},
    "proposers": {"core", "models", "fast"},
    "engine": {"core", "catalog", "kernels", "models", "fast", "proposers"},
    "serving": {"core", "catalog", "models", "fast", "proposers", "engine"},
    "server": {"core", "catalog", "engine", "serving"},
    "lsp": {"core", "catalog", "engine", "serving"},
    "demo": {"core", "catalog", "kernels", "engine", "serving", "figures"},
    "export": {"core", "catalog", "models", "proposers", "engine"},
    # self-distillation data (training/magpie_engines.py): our batching backend, or llama.cpp's
    # server through bench's runner
    "training": {"core", "catalog", "models", "proposers", "engine", "serving", "bench"},
    "bench": {"core", "catalog", "kernels", "models", "fast", "proposers", "engine", "serving", "server", "lsp"}
    | {"export", "figures"},
    "cli": {"core", "catalog", "kernels", "models", "fast", "proposers", "engine", "serving", "server", "lsp", "demo"}
    | {"figures", "bench", "training", "export"},
}


def _folder(module: str, depth: int) -> str | None:
    """The folder (or root module) of ``module`` ``depth`` levels below the root, None above it."""
    parts = module.split(".")
    return ".".join(parts[: depth + 1]) if len(parts) > depth else None


def folder_graph(graph: dict[str, set[str]], parent: str) -> dict[str, set[str]]:
    """Sibling folders (and modules) directly under ``parent`` -> the siblings they import."""
    depth = parent.count(".") + 1
    out: dict[str, set[str]] = {}
    for name, deps in graph.items():
        a = _folder(name, depth)
        if a is None or not name.startswith(parent + ".") or name.endswith("__main__"):
            continue
        out.setdefault(a, set())
        for d in deps:
            b = _folder(d, depth)
            if b is not None and b != a and d.startswith(parent + "."):
                out[a].add(b)
    return out


def test_folder_cycles_are_found():
    graph = {"p.a.x": {"p.b.y"}, "p.b.y": {"p.a.z"}, "p.a.z": set()}
    assert folder_graph(graph, "p") == {"p.a": {"p.b"}, "p.b": {"p.a"}}
    assert cycles(folder_graph(graph, "p")) == [["p.a", "p.b"]]


def test_no_cycle_between_sibling_folders():
    graph = import_graph()
    parents = {m.rpartition(".")[0] for m in graph if "." in m} | {"specdec"}
    for parent in sorted(parents):
        assert cycles(folder_graph(graph, parent)) == [], parent
    assert set(folder_graph(graph, "specdec")) >= {f"specdec.{f}" for f in LAYERS}


# The modules at the root of specdec/ besides its __init__: paths and env (the environment's
# variables; both import nothing of the package, so any folder may use them) and __main__ (the
# CLI's entry, which imports cli).
ROOT_MODULES = {"paths", "env", "__main__"}


def _specdec_folders() -> set[str]:
    return {d.name for d in (ROOT / "specdec").iterdir() if d.is_dir() and any(d.rglob("*.py"))}


def test_every_folder_has_a_layer():
    """No folder escapes the layer check by being missing from LAYERS (kernels once did)."""
    assert _specdec_folders() == set(LAYERS)
    roots = {p.stem for p in (ROOT / "specdec").glob("*.py")} - {"__init__"}
    assert roots == ROOT_MODULES


def test_the_layers_import_only_downwards():
    graph = import_graph()
    bad = []
    for name, deps in graph.items():
        if not name.startswith("specdec."):
            assert not any(d.startswith("experiments") for d in deps) or name.startswith("experiments"), name
            continue
        folder = name.split(".")[1]
        if folder in ROOT_MODULES:
            assert folder == "__main__" or not deps, name  # paths and env import nothing of the package
            continue
        assert folder in LAYERS, name
        for d in deps:
            other = d.split(".")[1] if d.startswith("specdec.") and d.count(".") else None
            if d.startswith("experiments"):
                bad.append((name, d))
            elif other and other != folder and other not in ROOT_MODULES and other not in LAYERS[folder]:
                bad.append((name, d))
    assert bad == []
    assert LAYERS["core"] == set() and "bench" not in LAYERS["demo"]  # the rules the docs state
    assert graph["specdec.models.native"] >= {"specdec.kernels"}  # it sees the kernels' edges


def _private_imports(path: Path, mods: dict[str, Path]) -> list[str]:
    """Names starting with one underscore that a module takes from another project module, by
    ``from m import _x`` or ``m._x`` on an imported module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases: dict[str, str] = {}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in mods:
                    aliases[a.asname or a.name] = full
                elif a.name.startswith("_") and not a.name.startswith("__"):
                    out.append(f"{node.module}.{a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in mods:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            out.append(f"{aliases[node.value.id]}.{node.attr}")
    return out


def test_the_private_import_finder_finds_them(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from specdec.core.step import _x\nfrom specdec.core import step as S\nS._y()\nS.z()\n")
    mods = {"specdec.core.step": f}
    assert _private_imports(f, mods) == ["specdec.core.step._x", "specdec.core.step._y"]


def test_no_module_imports_another_modules_private_names():
    mods = _modules()
    found = {name: _private_imports(path, mods) for name, path in mods.items()}
    assert {k: v for k, v in found.items() if v} == {}


def test_argparse_only_in_the_commands():
    """The library parses no command line: argparse lives in specdec/cli and in the product
    commands' own ``python -m`` entry points (bench, training)."""
    for name, path in _modules().items():
        if name.startswith("specdec.") and name.split(".")[1] not in ("cli", "bench", "training"):
            assert "import argparse" not in path.read_text(encoding="utf-8"), name


def test_the_install_ships_one_top_level_package():
    """``pip install .`` ships ``specdec`` alone (pyproject's find rule), and everything under it is
    a package of it; tests/ and experiments/ stay in the checkout."""
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert cfg["tool"]["setuptools"]["packages"]["find"]["include"] == ["specdec*"]
    assert cfg["project"]["scripts"]["specdec"] == "specdec.cli.main:main"
    for d in (ROOT / "specdec").rglob("*"):
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py")):
            assert (d / "__init__.py").exists(), d


def test_a_new_method_is_one_registry_entry(engine, monkeypatch):
    """An 'echo' method (drafts the pending token twice) registered in specdec/core/methods.py alone is
    offered by a new engine, its descriptions reach the front ends, and it is exact."""
    from specdec.core import methods as M
    from specdec.core.config import GenerateSpec
    from specdec.core.tree import Draft
    from specdec.engine.session import Engine
    from specdec.server import ws_protocol as proto

    class Echo:
        name = "echo"

        def propose(self, ctx):
            n = min(2, ctx.budget, ctx.k_max or 2)
            return Draft.chain(torch.tensor([ctx.tokens[-1]] * n)) if n > 0 else Draft.empty()

    class EchoBatch:  # its batch form: every echo row of a step in one call
        catch_up_ms, calls = 0.0, 0

        def new_state(self):
            return None  # nothing per request

        def propose(self, states, contexts):
            self.calls += 1
            return [Echo().propose(ctx) for ctx in contexts]

        def release(self, state):
            pass

        def nbytes(self):
            return 0

    batch = EchoBatch()
    about = "repeat the pending token (a test)"
    entry = M.Method("echo", about, "chain", True, 2, "tokens", lambda res: Echo(), batch=lambda *a: batch)
    monkeypatch.setitem(M.METHODS, "echo", entry)
    twin = Engine(engine.tokenizer, engine.target.model, None, heads_dir=None)
    assert "echo" in twin.methods and "draft" not in twin.methods
    hello = proto.hello(twin.methods, twin.context, proto.Limits(), False)
    assert {
        "name": "echo",
        "description": about,
        "drafts": "chain",
        "deterministic": True,
        "auto_k": 2,
        "k_means": "tokens",
    } in hello["method_info"]
    prompt = "x = [0, 0, 0, 0\n"
    base = twin.generate(prompt, GenerateSpec(method="none", max_new_tokens=24)).tokens
    out = twin.generate(prompt, GenerateSpec(method="echo", max_new_tokens=24))
    assert out.tokens == base and out.stats.drafted > 0
    # the batch takes its batch form from the same entry: no other file names the method
    from specdec.serving.backend import Request
    from specdec.serving.batch import BatchBackend

    b = BatchBackend(twin, max_batch=2, max_queue=4)
    try:
        assert b._proposers.batched["echo"] is batch and set(b._proposers.batched) == {"echo", "lookup", "suffix"}
        handles = [b.submit(Request(prompt, GenerateSpec(method="echo", max_new_tokens=24))) for _ in range(2)]
        assert all([t for ev in h for t in ev.token_ids] == base for h in handles)
        assert batch.calls > 0
    finally:
        assert b.shutdown(30)
