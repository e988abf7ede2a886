"""The shape of the package: its import graph has no cycles and no arrow runs back up.

Every `harness/**/*.py` is parsed (ast, nothing imported), and every import of a
`harness.*` module becomes an arrow, module-level or inside a function. The layers below
are docs/architecture.md's table: one folder of harness/ per layer, and a module imports
only modules of its own layer or of a lower one. Imports of the project's own modules
inside functions are at most MAX_LAZY, each with a comment saying why; what `harness
--help` and `harness validate` load at module level imports nothing of HEAVY but numpy.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import REPO

ROOT = REPO / "harness"

# Lowest first: one folder of harness/ per layer (its name is the folder's), the package's
# own __init__ in the lowest and the command line, the only top-level module besides, on top.
# A module's layer is its folder; it imports only modules of its own layer or of a lower one.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("harness", "harness.__init__", "harness.base")),
    ("infra", ("harness.infra",)),
    ("model", ("harness.model",)),
    ("verdict", ("harness.verdict",)),
    ("mechanisms", ("harness.mechanisms",)),
    ("experiments", ("harness.experiments",)),
    ("publish", ("harness.publish",)),
    ("run", ("harness.run",)),
    ("command line", ("harness.cli", "harness.__main__")),
]

# The modules allowed beside the layer folders at the top of harness/, and how many entries it may hold.
TOP_MODULES = {"__init__", "__main__", "cli"}
MAX_TOP_LEVEL = 11  # eight layer folders and the three modules

# Third-party packages whose import is slow or needs a device: what the command line and the
# suites' drivers modules load at module level may not load one (numpy aside, for the drivers).
HEAVY = {
    "torch",
    "transformers",
    "sentence_transformers",
    "onnx",
    "onnxruntime",
    "tensorrt",
    "pycuda",
    "cuda",
    "libcachesim",
    "numba",
    "vllm",
    "gptcache",
    "numpy",
    "pandas",
    "scipy",
    "sklearn",
    "faiss",
    "lmdb",
    "psycopg",
    "psycopg2",
    "pynvml",
    "prometheus_api_client",
    "hdrhistogram",
    "gguf",
    "llama_cpp",
    "datasets",
}

# Imports of the project's own modules inside functions: at most this many, each with a comment saying why.
MAX_LAZY = 10


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    lazy: bool  # inside a function
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, ast.Module]:
    return {_module_name(p): ast.parse(p.read_text(), str(p)) for p in sorted(ROOT.rglob("*.py"))}


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module `name` is, or is inside (`harness.x.f` -> `harness.x`)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imported(node: ast.AST, module: str) -> list[str]:
    """The absolute names an import statement brings in (a `from X import y` may import module X.y)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = (module if _is_package(module) else module.rpartition(".")[0]).split(".")
            parts = package[: len(package) - node.level + 1]
            base = ".".join(parts + ([base] if base else []))
        submodules = [f"{base}.{a.name}" for a in node.names]
        # `from harness.base import stats` imports the module stats (and the package's __init__,
        # which only documents its layer): the arrow goes to the module
        return submodules if all(m in MODULES for m in submodules) else [base] + submodules
    return []


def _from_base(node: ast.ImportFrom, module: str) -> str:
    """The absolute module a `from X import ...` names as X."""
    return _imported(ast.ImportFrom(node.module, [ast.alias("*")], node.level), module)[0]


def _is_package(module: str) -> bool:
    return (ROOT.parent / module.replace(".", "/") / "__init__.py").exists()


def _walk(tree: ast.Module):
    """(import node, inside a function) for every import, module-level ones first."""

    def visit(node, lazy):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, lazy
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from visit(child, inner)

    yield from visit(tree, False)


def _graph() -> tuple[list[Arrow], dict[str, set[str]]]:
    arrows, third_party = [], {}
    for module, tree in MODULES.items():
        third_party[module] = set()
        for node, lazy in _walk(tree):
            for name in _imported(node, module):
                if name == "harness" or name.startswith("harness."):
                    target = _resolve(name)
                    if target and target != module and not (name == "harness" and isinstance(node, ast.ImportFrom)):
                        arrows.append(Arrow(module, target, lazy, node.lineno))
                elif name and not lazy and not (isinstance(node, ast.ImportFrom) and node.level):
                    third_party[module].add(name.split(".")[0])
    unique = {(a.source, a.target, a.lazy): a for a in arrows}
    return list(unique.values()), third_party


ARROWS, THIRD_PARTY = _graph()


def layer_of(module: str) -> int:
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if module == p or module.startswith(p + "."):
                if best is None or len(p) > best[1]:
                    best = (i, len(p))
    if best is None:
        raise AssertionError(
            f"{module} is in no layer: add it to LAYERS in tests/unit/test_architecture.py "
            f"(and to docs/architecture.md's layer table)"
        )
    return best[0]


def heavy_modules() -> set[str]:
    """Modules that load a HEAVY package at module level, themselves or through their module-level imports."""
    eager: dict[str, set[str]] = {m: set() for m in MODULES}
    for a in ARROWS:
        if not a.lazy:
            eager[a.source].add(a.target)
    heavy = {m for m, names in THIRD_PARTY.items() if names & HEAVY}
    changed = True
    while changed:
        changed = False
        for m, targets in eager.items():
            if m not in heavy and targets & heavy:
                heavy.add(m)
                changed = True
    return heavy


def cycles(arrows: list[Arrow]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    edges: dict[str, set[str]] = {}
    for a in arrows:
        edges.setdefault(a.source, set()).add(a.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10 * len(MODULES) + 100))
    try:
        for v in sorted(edges):
            if v not in index:
                strongconnect(v)
    finally:
        sys.setrecursionlimit(old)
    return found


def test_the_graph_is_read():
    """The checks below see the package: its modules and the arrows everyone knows of."""
    assert len(MODULES) > 50
    pairs = {(a.source, a.target) for a in ARROWS}
    assert ("harness.run.runner", "harness.run.selection") in pairs and (
        "harness.model.spec",
        "harness.model.driver_contract",
    ) in pairs
    assert ("harness.experiments.redis_cluster.drivers", "harness.model.driver_contract") in pairs
    assert (
        "yaml" in THIRD_PARTY["harness.model.yaml_fields"]
        and "numpy" in THIRD_PARTY["harness.mechanisms.kv_blocks.trace"]
    )


def test_no_import_cycles():
    found = cycles(ARROWS)
    assert not found, "import cycles (module-level and function-level imports both count): " + "; ".join(
        " -> ".join(c) for c in found
    )


def test_the_cycle_finder_finds_a_cycle():
    """The check above could fail: a made-up arrow back from spec to results closes a circle."""
    made_up = ARROWS + [Arrow("harness.model.driver_contract", "harness.model.stored_run", False, 0)]
    assert any(
        {"harness.model.driver_contract", "harness.model.stored_run", "harness.model.spec"} <= set(c)
        for c in cycles(made_up)
    )


def upward(arrows: list[Arrow]) -> list[str]:
    """The arrows that run from a layer up to a higher one."""
    return sorted(
        f"{a.source} (layer {LAYERS[layer_of(a.source)][0]!r}) imports {a.target} "
        f"(layer {LAYERS[layer_of(a.target)][0]!r}) at line {a.line}"
        for a in arrows
        if layer_of(a.target) > layer_of(a.source)
    )


def test_nothing_imports_upward():
    up = upward(ARROWS)
    assert not up, "imports that run back up the layers:\n" + "\n".join(up)


def test_the_upward_check_finds_a_made_up_arrow():
    """The check above could fail: a made-up arrow from base up to the runner is found."""
    made_up = [Arrow("harness.base.errors", "harness.run.runner", False, 0)]
    assert upward(ARROWS + made_up) and not upward(ARROWS)


def folder_of(module: str) -> str | None:
    """The layer folder `module` sits in (`harness.infra.cluster` -> `infra`), None at the top of harness/."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and _is_package(".".join(parts[:2])) else None


def test_each_layer_is_one_folder():
    """A layer is a folder of harness/ of its name, and a module's layer is its folder."""
    for name, prefixes in LAYERS[:-1]:
        assert f"harness.{name}" in prefixes and _is_package(f"harness.{name}"), name
        assert set(prefixes) - {"harness", "harness.__init__"} == {f"harness.{name}"}, name
    assert all(folder_of(p) is None for p in LAYERS[-1][1])
    wrong = [m for m in MODULES if folder_of(m) and LAYERS[layer_of(m)][0] != folder_of(m)]
    assert not wrong, f"modules whose layer is not their folder: {wrong}"


def top_level(root: Path) -> tuple[list[str], list[str]]:
    """The modules (.py files) and packages at the top of `root`."""
    files = sorted(p.stem for p in root.glob("*.py"))
    packages = sorted(p.name for p in root.iterdir() if (p / "__init__.py").exists())
    return files, packages


def test_the_top_of_harness_holds_at_most_11_entries():
    """harness/ holds the layer folders, its __init__ and __main__, and the command line: nothing else."""
    files, packages = top_level(ROOT)
    assert len(files) + len(packages) <= MAX_TOP_LEVEL, files + packages
    assert set(files) <= TOP_MODULES, f"modules beside the layer folders: {sorted(set(files) - TOP_MODULES)}"
    assert set(packages) == {name for name, _ in LAYERS[:-1]}, packages


# A file holds one job: no module of harness/ over MAX_FILE_LINES, none of the model over
# MAX_MODEL_LINES (issue 64: spec.py had grown to 1,521 lines holding YAML loading, the suite
# model and the ledger; four files were over 800).
MAX_FILE_LINES = 800
MAX_MODEL_LINES = 600


def too_long(root: Path) -> list[str]:
    """The modules under `root` (a harness/ tree) over their line bound, with their length."""
    out = []
    for path in sorted(root.rglob("*.py")):
        bound = MAX_MODEL_LINES if path.relative_to(root).parts[0] == "model" else MAX_FILE_LINES
        n = len(path.read_text().splitlines())
        if n > bound:
            out.append(f"{path.relative_to(root.parent)}: {n} lines, over {bound}: split it by job")
    return out


def test_no_module_is_over_its_line_bound():
    long = too_long(ROOT)
    assert not long, "\n".join(long)


def test_the_line_bound_check_could_fail(tmp_path):
    """A long module, and a model module over the model's lower bound, are both named."""
    root = tmp_path / "harness"
    (root / "model").mkdir(parents=True)
    (root / "model" / "big.py").write_text("x = 1\n" * (MAX_MODEL_LINES + 1))
    (root / "run.py").write_text("x = 1\n" * (MAX_FILE_LINES + 1))
    (root / "ok.py").write_text("x = 1\n" * MAX_FILE_LINES)
    long = too_long(root)
    assert [line.split(":")[0] for line in long] == ["harness/model/big.py", "harness/run.py"], long


# The mechanisms by name (issue 64): what several suites share is packages named for what they
# hold, never flat modules told apart by prefixes; beside the suites, experiments/ holds only
# its own __init__ and the views' registry.
EXPERIMENTS_MODULES = {"__init__", "views"}
MECHANISMS = {"kv_blocks", "cache_policies", "onnx_models", "semantic"}


def loose_modules(root: Path) -> list[str]:
    """Modules that sit loose in experiments/ or mechanisms/ under `root` (a harness/ tree)."""
    experiments, _ = top_level(root / "experiments")
    mechanisms, _ = top_level(root / "mechanisms")
    return [f"experiments/{m}.py" for m in experiments if m not in EXPERIMENTS_MODULES] + [
        f"mechanisms/{m}.py" for m in mechanisms if m != "__init__"
    ]


def test_the_mechanisms_are_packages_named_for_what_they_hold():
    assert set(top_level(ROOT / "mechanisms")[1]) == MECHANISMS
    loose = loose_modules(ROOT)
    assert not loose, f"put these in a package of harness/mechanisms/ named for what they hold: {loose}"


def test_the_loose_module_check_could_fail(tmp_path):
    for name in ("experiments/__init__.py", "experiments/lruk.py", "mechanisms/__init__.py", "mechanisms/kv_x.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    assert loose_modules(tmp_path) == ["experiments/lruk.py", "mechanisms/kv_x.py"]


def test_the_top_level_check_could_fail(tmp_path):
    """The count above sees a module put beside the folders."""
    for name in ("cli.py", "stray.py", "base/__init__.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    files, packages = top_level(tmp_path)
    assert files == ["cli", "stray"] and packages == ["base"] and not set(files) <= TOP_MODULES


def test_the_folders_import_downward_only():
    """Folder by folder: the graph of folders (and the top-level modules) has no cycle."""

    def unit(m: str) -> str:
        return folder_of(m) or m

    folder_arrows = [
        Arrow(unit(a.source), unit(a.target), a.lazy, a.line) for a in ARROWS if unit(a.source) != unit(a.target)
    ]
    assert not cycles(folder_arrows)
    made_up = folder_arrows + [Arrow("base", "run", False, 0)]
    assert cycles(made_up)


# ---- one suite, one folder: no suite imports another; tools/ reads no suite (issue 55) --------
SHARED = "harness.mechanisms"  # what several suites share: the mechanisms, a layer below the suites
TOOLS = REPO / "tools"


def suite_of(module: str) -> str | None:
    """The suite package `module` is part of (`harness.experiments.serving.client` ->
    `harness.experiments.serving`); None for the experiments package's own modules (views, ...)
    and everything outside harness.experiments (the mechanisms too)."""
    parts = module.split(".")
    if len(parts) < 3 or parts[:2] != ["harness", "experiments"]:
        return None
    package = ".".join(parts[:3])
    return package if _is_package(package) else None


def between_suites(arrows: list[Arrow]) -> list[str]:
    """Arrows from one suite into another, and from below the suites (the mechanisms, the
    experiments package's own modules) up into a suite."""
    bad = []
    for a in arrows:
        src, dst = suite_of(a.source), suite_of(a.target)
        if dst is None or src == dst:
            continue
        if src is not None:
            bad.append(
                f"{a.source}:{a.line} imports {a.target}: suite {src} reads suite {dst} (move what both "
                f"use into {SHARED})"
            )
        elif a.source.startswith(("harness.experiments", SHARED)):
            bad.append(f"{a.source}:{a.line} imports {a.target}: below the suites, it reads suite {dst}")
    return sorted(bad)


def test_no_suite_imports_another_and_the_mechanisms_import_no_suite():
    bad = between_suites(ARROWS)
    assert not bad, "\n".join(bad)
    assert any(a.target.startswith(SHARED + ".") for a in ARROWS if suite_of(a.source))  # the layer is used


def test_the_suite_check_finds_made_up_arrows():
    """The check above could fail: a suite reading another, a mechanism reading a suite."""
    made_up = [
        Arrow("harness.experiments.serving.semantic_case", "harness.experiments.semantic_cache.ttft_case", False, 1),
        Arrow(f"{SHARED}.semantic.stream", "harness.experiments.semantic_cache.keys_case", False, 2),
        Arrow("harness.mechanisms.cache_policies.lruk", "harness.experiments.eviction.drivers", True, 3),
    ]
    assert len(between_suites(made_up)) == 3
    assert suite_of(f"{SHARED}.kv_blocks.prefix") is None and suite_of("harness.experiments.views") is None
    assert suite_of("harness.experiments.kv_trace.drivers") == "harness.experiments.kv_trace"


def _tool_modules() -> dict[str, ast.Module]:
    paths = [p for p in sorted(TOOLS.rglob("*.py")) if "node_modules" not in p.parts]
    return {
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): ast.parse(p.read_text(), str(p))
        for p in paths
    }


def tool_arrows(tools: dict[str, ast.Module]) -> list[Arrow]:
    """Every import of a harness module by a module of tools/ (inside functions too)."""
    out = []
    for module, tree in tools.items():
        for node, lazy in _walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                continue  # tools' own relative imports
            for name in _imported(node, "harness"):
                if name.startswith("harness."):
                    target = _resolve(name)
                    if target:
                        out.append(Arrow(module, target, lazy, node.lineno))
    return out


def tools_reading_suites(arrows: list[Arrow]) -> list[str]:
    return sorted(
        f"{a.source}:{a.line} imports {a.target}: a tool reads suite {suite_of(a.target)} (use {SHARED} "
        f"or the command line)"
        for a in arrows
        if suite_of(a.target)
    )


def test_the_tools_read_no_suite():
    """tools/ (the GPU check, the browser's driver) uses the harness's layers and the shared
    experiments, never a suite's own modules."""
    tools = _tool_modules()
    arrows = tool_arrows(tools)
    assert "tools.gpu_check.probes" in tools and any(a.target.startswith(SHARED) for a in arrows)
    bad = tools_reading_suites(arrows)
    assert not bad, "\n".join(bad)


def test_the_tools_check_finds_a_made_up_arrow():
    tree = ast.parse("def f():\n    from harness.experiments.semantic_cache import ttft_case\n")
    arrows = tool_arrows({"tools.demo": tree})
    assert [a.target for a in arrows] == ["harness.experiments.semantic_cache.ttft_case"] and arrows[0].lazy
    assert tools_reading_suites(arrows)


@pytest.mark.parametrize(
    "forbidden", ["harness.run.runner", "harness.run.selection", "harness.publish.outputs", "harness.cli"]
)
def test_no_experiment_or_report_imports_the_runner(forbidden):
    bad = [
        f"{a.source}:{a.line}"
        for a in ARROWS
        if a.target == forbidden and (a.source.startswith(("harness.experiments", "harness.publish.")))
    ]
    assert not bad, f"{forbidden} imported by {', '.join(bad)}"


SUITE_PACKAGES = sorted(
    m for m in MODULES if m.startswith("harness.experiments.") and m.count(".") == 2 and _is_package(m)
)


def register_calls(module: str, tree: ast.Module) -> list[int]:
    """The lines where `module` calls the driver contract's `register`: by its name (or an
    alias) imported from harness.model.driver_contract, or through the module itself."""
    names, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _from_base(node, module)
            if base == "harness.model.driver_contract":
                names |= {a.asname or a.name for a in node.names if a.name == "register"}
            elif base == "harness.model":
                modules |= {a.asname or a.name for a in node.names if a.name == "driver_contract"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "harness.model.driver_contract"}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id in names) or (
                isinstance(f, ast.Attribute) and f.attr == "register" and ast.unparse(f.value) in modules
            ):
                lines.append(node.lineno)
    return lines


def test_only_a_suites_drivers_module_registers_drivers():
    """Every suite registers its drivers in one module, harness/experiments/<suite>/drivers.py
    (load_all() imports only those), and nothing else in the package calls `register`."""
    allowed = {f"{s}.drivers" for s in SUITE_PACKAGES}
    bad = [
        f"{m}:{line} calls register (register drivers in harness/experiments/<suite>/drivers.py)"
        for m, tree in MODULES.items()
        if m not in allowed
        for line in register_calls(m, tree)
    ]
    assert not bad, "\n".join(bad)
    empty = ast.Module([], [])
    silent = [s for s in SUITE_PACKAGES if not register_calls(f"{s}.drivers", MODULES.get(f"{s}.drivers", empty))]
    assert len(SUITE_PACKAGES) >= 10 and not silent, f"suites with no drivers.py that registers a driver: {silent}"


@pytest.mark.parametrize(
    "source",
    [
        "from harness.model.driver_contract import register as reg\n@reg('x', params={})\ndef f(ctx): pass\n",
        "from harness.model import driver_contract as dc\ndc.register('x', params={})(print)\n",
        "import harness.model.driver_contract\nharness.model.driver_contract.register('x', params={})(print)\n",
        "from ...model.driver_contract import register\nregister('x', params={})(print)\n",
    ],
)
def test_the_register_finder_finds_a_call(source):
    """The check above could fail: each way of calling register is found."""
    assert register_calls("harness.experiments.demo.case", ast.parse(source)) != []


def test_infrastructure_takes_the_target_from_target_py():
    infra = [m for m in MODULES if LAYERS[layer_of(m)][0] == "infra"]
    bad = [
        f"{a.source} imports {a.target}"
        for a in ARROWS
        if a.source in infra and a.target.startswith(("harness.model", "harness.run"))
    ]
    assert infra and not bad, bad


def lazy_imports(path: str, source: str) -> list[str]:
    """`path:line` of each import of the project's own modules (absolute or relative) inside a
    function, with the comment that says why (on its line or the line above), or `UNEXPLAINED`."""
    lines = source.splitlines()
    found = []
    for node, lazy in _walk(ast.parse(source)):
        own = (
            node.level or (node.module or "").split(".")[0] == "harness"
            if isinstance(node, ast.ImportFrom)
            else any(a.name.split(".")[0] == "harness" for a in node.names)
        )
        if lazy and own:
            here = lines[node.end_lineno - 1].partition("#")[2].strip()
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            why = here or (above[1:].strip() if above.startswith("#") else "")
            found.append(f"{path}:{node.lineno} {ast.unparse(node)}  # {why or 'UNEXPLAINED'}")
    return found


LAZY = [
    entry for p in sorted(ROOT.rglob("*.py")) for entry in lazy_imports(str(p.relative_to(ROOT.parent)), p.read_text())
]


def test_few_function_level_imports_of_own_modules_each_explained():
    """Own modules are imported at module level (drivers are found by module path, with
    importlib): the few inside a function say why."""
    assert len(LAZY) <= MAX_LAZY, (
        f"{len(LAZY)} imports of project modules inside functions (at most "
        f"{MAX_LAZY}): import at module level, a heavy third-party package inside the function instead:\n"
        + "\n".join(LAZY)
    )
    bad = [e for e in LAZY if e.endswith("# UNEXPLAINED")]
    assert not bad, "function-level imports without a comment saying why:\n" + "\n".join(bad)


def test_the_function_level_import_check_could_fail():
    source = "import os\n\ndef f():\n    from harness.base import stats\n    from . import x  # why\n    import json\n"
    assert lazy_imports("m.py", source) == [
        "m.py:4 from harness.base import stats  # UNEXPLAINED",
        "m.py:5 from . import x  # why",
    ]


def eager_closure(module: str) -> set[str]:
    """The project modules importing `module` loads: its module-level imports, theirs, and their packages."""
    eager: dict[str, set[str]] = {}
    for a in ARROWS:
        if not a.lazy:
            eager.setdefault(a.source, set()).add(a.target)
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += list(eager.get(m, ())) + [m.rsplit(".", i)[0] for i in range(1, m.count("."))]
    return seen


@pytest.mark.parametrize("module", ["harness.cli"] + sorted(m for m in MODULES if m.endswith(".drivers")))
def test_the_command_line_and_the_drivers_load_nothing_heavy(module):
    """`harness --help` loads harness.cli, `harness validate` every suite's drivers module too:
    neither loads a HEAVY package at module level (the drivers may load numpy)."""
    allowed = set() if module == "harness.cli" else {"numpy"}
    loaded = {name for m in eager_closure(module) for name in THIRD_PARTY.get(m, ())} & HEAVY
    assert loaded <= allowed, f"{module} loads {sorted(loaded - allowed)} when imported"


def test_a_heavy_module_is_found_through_what_it_imports():
    heavy = heavy_modules()
    direct = {m for m, names in THIRD_PARTY.items() if names & HEAVY}
    through = {a.source for a in ARROWS if not a.lazy and a.target in direct} - direct
    assert "harness.mechanisms.kv_blocks.trace" in direct and through and through <= heavy
    assert "harness.base.errors" not in heavy and "harness.run.runner" not in heavy and "harness.cli" not in heavy


def statement_lines(func: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's length whatever the formatter does with long calls: the number of lines a
    statement of it starts on (its signature, docstring and each statement, nested ones too)."""
    return len({s.lineno for s in ast.walk(func) if isinstance(s, ast.stmt)})


def test_a_function_is_measured_in_statement_lines():
    tree = ast.parse("def f(a):\n    x = g(\n        a,\n        b,\n    )\n    if x:\n        return 1; y = 2\n")
    assert statement_lines(tree.body[0]) == 4  # def, x = ..., if, return (y = 2 shares its line)


def test_no_function_over_60_lines_in_the_package():
    long = []
    for module, tree in MODULES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = statement_lines(node)
                if n > 60:
                    long.append(f"{module}.{node.name}: {n} lines")
    over = [f for f in long if f.split(":")[0] not in LONG_FOR_NOW]
    assert not over, "functions over 60 lines (split them):\n" + "\n".join(over)
    split = LONG_FOR_NOW - {f.split(":")[0] for f in long}
    assert not split, f"LONG_FOR_NOW lists functions that are no longer over 60 lines (drop them): {sorted(split)}"


# Functions over 60 lines that other work splits (issue 20 item 6): exactly those still over
# (none now); none may be added.
LONG_FOR_NOW: set[str] = set()


def test_the_docs_layer_table_is_this_list():
    """docs/architecture.md's layer table names the layers of LAYERS, top first, and in each
    row its folder and every module and package the folder holds (a module added or moved
    is added or moved in the docs too)."""
    doc = (REPO / "docs" / "architecture.md").read_text()
    section = doc[doc.index("## Layers") :]
    section = section[: section.index("\n## ", 3)]
    rows = [r.split("|")[1:3] for r in section.splitlines() if r.startswith("| ") and not r.startswith("| layer")]
    assert [name.strip() for name, _ in rows] == [name for name, _ in reversed(LAYERS)]
    for (_, modules), (layer, prefixes) in zip(rows, reversed(LAYERS)):
        shown = set(re.findall(r"`([^`]+)`", modules))
        if layer == "command line":
            want = {f"{p.removeprefix('harness.')}.py" for p in prefixes}
        else:
            folder = ROOT / layer
            want = (
                {f"{layer}/"}
                | {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
                | {f"{p.name}/" for p in folder.iterdir() if (p / "__init__.py").exists()}
            )
            if layer == "experiments":
                want = {f"{layer}/"}
        assert want <= shown, f"docs/architecture.md's row {layer!r} lacks {sorted(want - shown)}"


# ---- the ledger's references share no code with what they check (issue 52) -------------------
def _other_packages() -> dict[str, set[str]]:
    """module -> the top-level names of the packages outside harness/ it imports, inside functions too."""
    out: dict[str, set[str]] = {}
    for module, tree in MODULES.items():
        out[module] = {
            n.split(".")[0]
            for node, _ in _walk(tree)
            for n in _imported(node, module)
            if n
            and not (n == "harness" or n.startswith("harness."))
            and not (isinstance(node, ast.ImportFrom) and node.level)
        }
    return out


OTHER_PACKAGES = _other_packages()


def _by_name() -> tuple[list[Arrow], set[str]]:
    """Imports by name at run time: importlib.import_module("x") / __import__("x") with a
    constant name as arrows, and the modules that import by a name computed at run time."""
    arrows, computed = [], set()
    for module, tree in MODULES.items():
        for node in ast.walk(tree):
            f = getattr(node, "func", None)
            name = getattr(f, "attr", None) or getattr(f, "id", None)
            if not isinstance(node, ast.Call) or name not in ("import_module", "__import__"):
                continue
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                target = _resolve(arg.value)
                if target:
                    arrows.append(Arrow(module, target, True, node.lineno))
            else:
                computed.add(module)
    return arrows, computed


BY_NAME, COMPUTED_NAMES = _by_name()


def reference_imports(
    arrows: list[Arrow], references: list[tuple[str, tuple[str, ...]]], others: dict[str, set[str]] | None = None
) -> list[str]:
    """For each (reference module, modules it must not import): what it reaches of them,
    through every arrow (imports inside functions too), read by this file's own graph; the
    packages outside harness/ (libcachesim, vllm) it reaches count too."""
    others = OTHER_PACKAGES if others is None else others
    arrows = arrows + BY_NAME
    out = []
    for module, forbidden in references:
        if module in COMPUTED_NAMES:
            out.append(f"{module} imports by a name computed at run time: it could import what it checks")
        seen, todo = set(), [module]
        while todo:
            for a in arrows:
                if a.source == todo[-1] and a.target not in seen:
                    seen.add(a.target)
                    todo.insert(0, a.target)
            todo.pop()
        seen |= {p for m in seen | {module} for p in others.get(m, set())}
        hits = sorted(m for m in seen for f in forbidden if m == f or m.startswith(f + "."))
        out += [f"{module} imports {h}, which computes the number it checks" for h in hits]
        if module not in MODULES:
            out.append(f"{module} is named as a reference in the ledger but is no module of harness/")
    return out


def _ledger_references() -> list[tuple[str, tuple[str, ...]]]:
    """Every reference of every shipped claim pack's ledger (the seed's among them)."""
    from harness.model import packs

    return sorted(
        {
            (c.reference.module, c.reference.independent_of)
            for name in packs.names()
            for claim in packs.load(name).claims()
            for c in claim.checks
            if c.reference is not None and c.reference.module
        }
    )


def test_the_references_checked_are_every_packs():
    """A pack's ledger is not left out: the GPTCache pack's reference (GPTCache's own hit
    counter, read by gptcache_subject) is named by no other pack, and it is checked."""
    refs = dict(_ledger_references())
    assert "harness.experiments.semantic_cache.gptcache_subject" in refs
    assert (
        "harness.experiments.semantic_cache.gptcache_accuracy"
        in refs["harness.experiments.semantic_cache.gptcache_subject"]
    )


def test_no_reference_of_the_ledger_imports_what_it_checks():
    refs = _ledger_references()
    bad = reference_imports(ARROWS, refs)
    assert not bad, "references that share code with what they check:\n" + "\n".join(bad)


def test_the_reference_check_finds_a_made_up_arrow():
    """The check above could fail: a reference made to import (through a helper, inside a
    function) what it checks is found, and so is a reference module that does not exist."""
    refs = [("harness.base.stats", ("harness.model.spec",))]
    assert not reference_imports(ARROWS, refs)
    made_up = ARROWS + [
        Arrow("harness.base.stats", "harness.base.errors", True, 0),
        Arrow("harness.base.errors", "harness.model.spec", True, 0),
    ]
    assert reference_imports(made_up, refs) == [
        "harness.base.stats imports harness.model.spec, which computes the number it checks"
    ]
    assert reference_imports(ARROWS, [("harness.base.nothing", ("harness.model",))]) == [
        "harness.base.nothing is named as a reference in the ledger but is no module of harness/"
    ]
    libs = {**OTHER_PACKAGES, "harness.base.errors": {"libcachesim"}}
    assert reference_imports(made_up, [("harness.base.stats", ("libcachesim",))], libs) == [
        "harness.base.stats imports libcachesim, which computes the number it checks"
    ]


def test_the_reference_check_sees_imports_by_name():
    """Imports at run time are read too: driver_contract's plugin loader imports by a computed
    name (a reference module that did so would be refused), and a constant-name import_module
    is an arrow like any import."""
    assert "harness.model.driver_contract" in COMPUTED_NAMES
    assert reference_imports(ARROWS, [("harness.model.driver_contract", ("harness.experiments",))])[0] == (
        "harness.model.driver_contract imports by a name computed at run time: it could import what it checks"
    )
    assert all(a.lazy for a in BY_NAME)
