"""The house plan, checked: no import cycle anywhere, the library imports no front end or tool,
argparse lives only in app/ and tools/, and one registry entry is all a new method needs."""

from __future__ import annotations

import ast
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "app", "lsp", "tools")


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


def test_no_import_cycle_in_the_project():
    graph = import_graph()
    assert len(graph) > 60 and "engine.backend" in graph["engine.local"]  # the graph sees real edges
    assert cycles(graph) == []


def test_the_library_imports_no_front_end_or_tool():
    for name, deps in import_graph().items():
        if name.split(".")[0] == "engine":
            assert not {d for d in deps if d.split(".")[0] in ("app", "lsp", "tools")}, name
        if name.split(".")[0] == "lsp":
            assert not {d for d in deps if d.split(".")[0] in ("app", "tools")}, name


def test_argparse_only_in_app_and_tools():
    for name, path in _modules().items():
        if name.split(".")[0] in ("engine", "lsp"):
            assert "argparse" not in path.read_text(encoding="utf-8"), name


def test_a_new_method_is_one_registry_entry(engine, monkeypatch):
    """An 'echo' method (drafts the pending token twice) registered in engine/methods.py alone is
    offered by a new engine, its descriptions reach the front ends, and it is exact."""
    from app import ws_protocol as proto
    from engine import methods as M
    from engine.config import GenerateSpec
    from engine.session import Engine
    from engine.tree import Draft

    class Echo:
        name = "echo"

        def propose(self, ctx):
            n = min(2, ctx.budget, ctx.k_max or 2)
            return Draft.chain(torch.tensor([ctx.tokens[-1]] * n)) if n > 0 else Draft.empty()

    entry = M.Method("echo", "repeat the pending token (a test)", "chain", True, 2, "tokens", lambda res: Echo())
    monkeypatch.setitem(M.METHODS, "echo", entry)
    twin = Engine(engine.tokenizer, engine.target.model, None, heads_dir=None)
    assert "echo" in twin.methods and "draft" not in twin.methods
    hello = proto.hello(twin.methods, twin.context, proto.Limits(), False)
    assert {
        "name": "echo",
        "description": "repeat the pending token (a test)",
        "drafts": "chain",
        "deterministic": True,
        "auto_k": 2,
        "k_means": "tokens",
    } in hello["method_info"]
    prompt = "x = [0, 0, 0, 0\n"
    base = twin.generate(prompt, GenerateSpec(method="none", max_new_tokens=24)).tokens
    out = twin.generate(prompt, GenerateSpec(method="echo", max_new_tokens=24))
    assert out.tokens == base and out.stats.drafted > 0
