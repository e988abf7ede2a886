"""What a module of this project imports, directly or through what it imports: read from the
source files (every import statement, those inside functions too), never by importing them.

The ledger's references use it (issue 52): a reference must share no code with the number it
checks, so the run records what each reference module reaches of the modules it is
independent of, and a reference that reaches one of them cannot be trusted. The test of the
import graph (tests/unit/test_architecture.py) checks the same rule with its own reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

MAX_SOURCE_BYTES = 4_000_000  # a source file larger than this is not one of ours
# What a module reaches when it imports by a name computed at run time (importlib.import_module(x),
# __import__(x) with x not a constant): anything, so a reference module that does so itself is not
# independent. (A constant name is an ordinary import.)
DYNAMIC = "(an import by a computed name)"
DYNAMIC_CALLS = ("import_module", "__import__")


def _dynamic(node: ast.AST) -> tuple[bool, str | None]:
    """(is an importlib.import_module / __import__ call, its constant module name or None)."""
    if not isinstance(node, ast.Call):
        return False, None
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name not in DYNAMIC_CALLS:
        return False, None
    arg = node.args[0] if node.args else None
    return True, arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def module_file(root: Path, module: str) -> Path | None:
    """The source file of a dotted module name under `root` (the folder holding `harness/`)."""
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file() and not path.is_symlink():
            return path
    return None


def _own(root: Path, name: str) -> str | None:
    """The project module `name` is, or is inside (`harness.x.f` -> `harness.x`)."""
    while name and module_file(root, name) is None:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(root: Path, module: str, others: set[str] | None = None) -> set[str]:
    """The project modules `module`'s source imports (absolute and relative imports); the
    top-level names of the other packages it imports are added to `others` when given."""
    path = module_file(root, module)
    if path is None or path.stat().st_size > MAX_SOURCE_BYTES:
        return set()
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        dynamic, constant = _dynamic(node)
        if dynamic and constant is None:
            if others is not None:
                others.add(DYNAMIC)
            continue
        if dynamic and constant is not None:
            names = [constant]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            own = _own(root, name)
            if own and own != module:
                out.add(own)
            elif not own and name and others is not None and not (isinstance(node, ast.ImportFrom) and node.level):
                others.add(name.split(".")[0])
    return out


def closure(root: Path, module: str, others: set[str] | None = None) -> set[str]:
    """Every project module that importing `module` brings in (itself excluded), following
    imports inside functions too; the packages above each module count as imported. The
    top-level names of the other packages any of them imports go to `others` when given."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        for m in imports_of(root, current, others):
            parents = [".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 1)]
            for name in [m, *parents]:
                if name not in seen and name != module and module_file(root, name) is not None:
                    seen.add(name)
                    todo.append(name)
    return seen


def within(module: str, names) -> bool:
    """`module` is one of `names` or inside one of them (a package)."""
    return any(module == n or module.startswith(n + ".") for n in names)


def reaches(root: Path, module: str, targets) -> list[str] | None:
    """Which of `targets` (project modules or packages, or other packages such as libcachesim)
    `module` reaches; None when `module` is not found."""
    if module_file(root, module) is None:
        return None
    others: set[str] = set()
    found = closure(root, module, others) | others
    own: set[str] = set()
    imports_of(root, module, own)  # a computed name counts in the module itself, not in the plugin
    # loader of the layers below it (driver_contract.load_all imports the suites' drivers by name)
    return sorted({t for m in found - {DYNAMIC} for t in targets if within(m, [t])} | ({DYNAMIC} & own))
