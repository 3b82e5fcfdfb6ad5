"""The house's counts (issue 54), read from the source with ``ast``: how often one object reaches
into another's private names, how often callers probe a proposer's form with ``getattr``, how far
the command line's ``argparse.Namespace`` travels below ``specdec/cli``, which modules read
``os.environ`` besides the two that may, and which test modules import ``experiments/``.

Usage: ``python docs/tools/house_counts.py [--list]`` prints each count (``--list`` adds every
place counted). tests/test_house.py imports ``counts`` and holds each at most its recorded value,
so a new private read or probe fails the suite until it is removed or the limit is raised on
purpose. The rules, each a function below:

- private read: ``obj._x`` (load or store) where ``obj`` is not ``self``, ``cls`` or ``super()``,
  and ``getattr(obj, "_x")``/``hasattr(obj, "_x")`` with a literal name; dunders do not count. A
  chain from an imported module (``torch._C``) is a module private read, counted apart.
- proposer probe: ``getattr``/``hasattr`` on anything with a literal name from the batch form's
  contract (specdec/core/proposer.py ``BatchProposer``) or the single-request proposer's optional
  attributes.
- Namespace below cli: a function outside ``specdec/cli`` whose parameter ``args`` (or one
  annotated ``argparse.Namespace``) has attributes read in its body.
- environment read: ``os.environ.get``, ``os.environ[...]`` (load), ``os.getenv`` and ``in
  os.environ``, outside ``specdec/paths.py`` and ``specdec/env.py``.
- experiments import: a module under ``tests/`` that imports ``experiments`` at any depth.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV_READERS = ("specdec/paths.py", "specdec/env.py")
PROPOSER_NAMES = frozenset(
    {"new_state", "propose", "release", "nbytes", "catch_up_ms", "one_by_one", "chose_plain", "skip"}
)


def _files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _literal_attr_call(node: ast.AST, funcs: tuple[str, ...]) -> str | None:
    """The literal name of ``getattr(obj, "name", ...)`` (or another of ``funcs``), else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in funcs
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[1].value
    return None


def _imported_modules(tree: ast.AST) -> set[str]:
    """Names bound by ``import x`` / ``import x as y`` anywhere in the file."""
    return {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _owner_kind(owner: ast.AST, modules: set[str]) -> str:
    """'own' for self/cls/super(), 'module' for a chain from an imported module, else 'object'."""
    if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
        return "own"
    if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
        return "own"
    root = _root(owner)
    return "module" if isinstance(root, ast.Name) and root.id in modules else "object"


def _private_touches(tree: ast.AST) -> list[tuple[str, int, str]]:
    modules = _imported_modules(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            out.append((_owner_kind(node.value, modules), node.lineno, ast.unparse(node)))
            continue
        name = _literal_attr_call(node, ("getattr", "hasattr"))
        if name is not None and _private(name):
            out.append((_owner_kind(node.args[0], modules), node.lineno, ast.unparse(node)))
    return out


def private_reads(tree: ast.AST) -> list[tuple[int, str]]:
    return [(line, what) for kind, line, what in _private_touches(tree) if kind == "object"]


def module_private_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """A library's private names (``torch._C``, ``torch.ops.mkldnn._linear_pointwise``): counted
    apart, as each is a workaround for a missing public API, not one of our objects reaching into
    another."""
    return [(line, what) for kind, line, what in _private_touches(tree) if kind == "module"]


def proposer_probes(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        name = _literal_attr_call(node, ("getattr", "hasattr"))
        if name in PROPOSER_NAMES:
            out.append((node.lineno, ast.unparse(node)))
    return out


def _namespace_param(arg: ast.arg) -> bool:
    return arg.arg == "args" or (arg.annotation is not None and "Namespace" in ast.unparse(arg.annotation))


def namespace_uses(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = fn.args
        names = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if _namespace_param(p)}
        if not names:
            continue
        for node in ast.walk(fn):
            reads = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names
            probe = _literal_attr_call(node, ("getattr", "hasattr")) is not None and (
                isinstance(node.args[0], ast.Name) and node.args[0].id in names
            )
            if reads or probe:
                out.append((fn.lineno, fn.name))
                break
    return out


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and ast.unparse(node.value) == "os"


def environ_reads(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        hit = (
            (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value))
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and (
                    (node.func.attr == "get" and _is_environ(node.func.value))
                    or (node.func.attr == "getenv" and ast.unparse(node.func.value) == "os")
                )
            )
            or (isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators))
        )
        if hit:
            out.append((node.lineno, ast.unparse(node)))
    return out


def experiments_imports(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        if any(n == "experiments" or n.startswith("experiments.") for n in names):
            out.append((node.lineno, ast.unparse(node)))
    return out


def _scan(files: list[Path], rule) -> list[str]:
    places = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        places += [f"{_rel(path)}:{line}: {what}" for line, what in rule(tree)]
    return places


def places() -> dict[str, list[str]]:
    """Every counted place per count, as ``path:line: code``."""
    package = _files("specdec")
    below_cli = [p for p in package if not _rel(p).startswith("specdec/cli/")]
    env = [p for p in package if _rel(p) not in ENV_READERS]
    tests = _files("tests")
    found = {
        "private_reads": _scan(package, private_reads),
        "module_private_reads": _scan(package, module_private_reads),
        "proposer_probes": _scan(package, proposer_probes),
        "namespace_below_cli": _scan(below_cli, namespace_uses),
        "environ_reads": _scan(env, environ_reads),
        "test_modules_importing_experiments": _scan(tests, experiments_imports),
    }
    # a test module counts once however many imports it has
    seen = {p.split(":")[0] for p in found["test_modules_importing_experiments"]}
    found["test_modules_importing_experiments"] = sorted(seen)
    return found


def counts() -> dict[str, int]:
    return {k: len(v) for k, v in places().items()}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    for name, where in places().items():
        print(f"{name:36} {len(where)}")
        if "--list" in argv:
            print("".join(f"    {w}\n" for w in where), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
