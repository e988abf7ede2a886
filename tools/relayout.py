"""Move `harness/`'s flat modules into its layer folders, and rewrite every reference (issue 41).

The package's modules were side by side in `harness/`; they live in one folder per layer
(base, infra, model, verdict, experiments, publish, run; `harness/cli.py` on top). MOVES is
the whole mapping, old module -> new module. The script

- `python tools/relayout.py apply`: moves the files (git mv; a path already moved is
  skipped), writes each new layer folder's `__init__.py`, then rewrites every tracked text
  file of the repository;
- `python tools/relayout.py rewrite PATH...`: rewrites only the given files (or folders):
  for a branch written before the move, after merging it (its new files still name the
  old modules).

Rewriting is idempotent (a file already rewritten is left as it is) and covers
`from harness import x` (`from harness.base import x`, an alias keeps a renamed module's old
name in the file), dotted names anywhere (`harness.cluster` in imports, `python -m
harness.worker`, mock targets in strings), paths (`harness/cluster.py`, `harness/tools/`)
and the suite READMEs' relative links to their views. Imports are re-sorted by ruff when it
is installed beside the interpreter.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Old module (under harness.) -> new module (under harness.). A package moves with what it holds.
MOVES: dict[str, str] = {
    # base: no project imports but each other's; pure helpers and the types every layer shares
    "errors": "base.errors",
    "paths": "base.paths",
    "formats": "base.format_versions",
    "files": "base.files",
    "hostnames": "base.hostnames",
    "signals": "base.signals",
    "stats": "base.stats",
    "text_data": "base.text_data",
    "progress": "base.progress",
    "file_cache": "base.file_cache",
    "safe_text": "base.safe_text",
    "metrics_model": "base.metrics_model",
    # infra: processes, servers, hosts and what runs on them
    "process": "infra.process",
    "http_get": "infra.http_get",
    "ownership": "infra.ownership",
    "model_wheels": "infra.model_wheels",
    "manifest": "infra.machine_facts",
    "target": "infra.target",
    "redis_server": "infra.redis_server",
    "cluster": "infra.cluster",
    "inventory": "infra.inventory",
    "server_stats": "infra.server_stats",
    "host_identity": "infra.host_identity",
    "tools": "infra.load_tools",
    "monitoring": "infra.monitoring",
    "serving_engine": "infra.serving_engine",
    # model: suite specs and the ledger, the driver contract, the stored run and its types
    "driver_contract": "model.driver_contract",
    "spec": "model.spec",
    "conditions": "model.conditions",
    "manifest_record": "model.manifest",
    "results": "model.stored_run",
    "driver_helpers": "model.driver_helpers",
    "child": "model.child",
    # verdict: analysis, comparison, history, and their wording
    "analysis": "verdict.analysis",
    "metric_history": "verdict.metric_history",
    "stepdetect": "verdict.stepdetect",
    "compare": "verdict.baseline",
    "verdicts": "verdict.verdicts_json",
    "summary": "verdict.summary",
    "report.format": "verdict.display",
    # publish: the report, its views, JUnit, the history page, measurements.md
    "report": "publish",
    "publish": "publish.outputs",
    # run: what a run runs and how
    "selection": "run.selection",
    "run_target": "run.target_lifecycle",
    "runner": "run.runner",
    "worker": "run.worker",
}

PACKAGES = {"tools", "monitoring", "serving_engine", "report"}  # the old names that are folders

# An old name that is also a new package: `harness.publish.render` is new, `harness.publish.publish`
# is old (the function publish of the old module). A bare `harness.publish` is left as it is, but
# `from harness import publish` is the old module.
AMBIGUOUS: dict[str, set[str]] = {
    "publish": {"outputs", "render", "svg", "junit", "history_page", "measurements", "views"},
}

LAYER_DOCS: dict[str, str] = {
    "base": "The lowest layer: errors and exit codes, paths, files, text made safe, signals, progress, "
            "small statistics, format versions and the Metric/Series types. Imports nothing of the "
            "project but each other.",
    "infra": "Infrastructure: processes (local or over SSH), Redis servers and the local cluster, "
             "inventories and targets, host facts and identities, the load tools, monitoring and the "
             "serving engine. Imports only harness.base.",
    "model": "The data model: suite specs and the claims ledger, the driver contract, the stored run "
             "(records, manifest) and a case's child process. Imports harness.base and harness.infra.",
    "verdict": "From a stored run to verdicts: analysis, the ledger's verdicts, comparison with a "
               "baseline, a metric's history with its steps, and their wording. Imports harness.model "
               "and below.",
    "publish": "Publishing a stored run: the HTML report and each suite's view, JUnit, the history page, "
               "docs/measurements.md, and `publish()` that writes them all. Imports harness.experiments "
               "and below.",
    "run": "Running suites: selection and plans, the target's lifecycle, the runner and the worker "
           "process. Imports every layer below; only harness.cli imports it.",
}


def _old_module_paths() -> list[tuple[str, str]]:
    """(old path, new path) under harness/, most specific first (report/format.py before report/)."""
    pairs = []
    for old, new in MOVES.items():
        o, n = old.replace(".", "/"), new.replace(".", "/")
        if old in PACKAGES:
            pairs.append((o, n))
        else:
            pairs.append((o + ".py", n + ".py"))
    return sorted(pairs, key=lambda p: -p[0].count("/"))


def move_files() -> None:
    """Move every file under harness/ that is still at an old path to its new one (git mv,
    or a plain rename for a file git does not track), file by file: a file a later branch
    added under an old folder (harness/report/views/new.py) moves too, and nothing is
    deleted. Then write the new layer folders' __init__.py where it is missing or empty."""
    pkg = ROOT / "harness"
    for path in sorted(p for p in pkg.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        old = path.relative_to(ROOT).as_posix()
        new = rewrite_text(old)
        if new == old:
            continue
        if (ROOT / new).exists():
            print(f"{old}: left where it is, {new} exists already")
            continue
        (ROOT / new).parent.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["git", "mv", old, new], cwd=ROOT, capture_output=True).returncode:
            path.rename(ROOT / new)
    for folder in sorted((p for p in pkg.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(q.is_file() and "__pycache__" not in q.parts for q in folder.rglob("*")):
            shutil.rmtree(folder)
    for layer, doc in LAYER_DOCS.items():
        init = pkg / layer / "__init__.py"
        if not init.exists() or not init.read_text().strip():
            init.parent.mkdir(exist_ok=True)
            init.write_text(f'"""{_wrap(doc)}"""\n')
            _git("add", str(init))


def _wrap(text: str, width: int = 92) -> str:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join(lines + [line]) + "\n"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def new_name(name: str) -> str:
    """The new dotted name of `name` (`harness.x.y`), or `name` itself when it names nothing moved."""
    if not name.startswith("harness."):
        return name
    rest = name[len("harness."):]
    parts = rest.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if head in MOVES:
            if head in AMBIGUOUS and (i == len(parts) or parts[i] in AMBIGUOUS[head]):
                return name
            return "harness." + ".".join([MOVES[head]] + parts[i:])
    return name


_DOTTED = re.compile(r"(?<![\w.])harness\.(" + "|".join(
    re.escape(k) for k in sorted(MOVES, key=len, reverse=True)) + r")(?!\w)(?P<after>\.\w+|\s+import\s+\(?\s*\w+)?")


def _dotted(match: re.Match) -> str:
    head, after = match.group(1), match.group("after") or ""
    if head in AMBIGUOUS:
        child = re.sub(r"^\W*(import\W*)?", "", after.strip())
        if not after or child in AMBIGUOUS[head]:
            return match.group(0)
    return "harness." + MOVES[head] + after


_FROM = re.compile(r"^(?P<indent>[ \t]*)from[ \t]+(?P<pkg>harness(?:\.\w+)*)[ \t]+import[ \t]+"
                   r"(?P<names>\([^)#]*\)|[^\n#(]*)(?P<comment>[ \t]*#[^\n]*)?$", re.MULTILINE)


def _from_import(match: re.Match) -> str:
    """`from harness[.pkg] import a, b as c` with each name sent to its new home."""
    pkg, indent = match.group("pkg"), match.group("indent")
    names = [n.strip() for n in match.group("names").strip().strip("()").split(",") if n.strip()]
    groups: dict[str, list[str]] = {}
    for item in names:
        name, _, alias = item.partition(" as ")
        name, alias = name.strip(), alias.strip()
        full = f"{pkg}.{name}"
        if full.removeprefix("harness.") in MOVES:  # `from harness import publish`: the old module
            parent, _, leaf = ("harness." + MOVES[full.removeprefix("harness.")]).rpartition(".")
            if leaf != name and not alias:
                alias = name
            groups.setdefault(parent, []).append(f"{leaf} as {alias}" if alias else leaf)
        else:
            target = pkg if pkg.removeprefix("harness.") in AMBIGUOUS and name in AMBIGUOUS[
                pkg.removeprefix("harness.")] else new_name(pkg)
            groups.setdefault(target, []).append(f"{name} as {alias}" if alias else name)
    if list(groups) == [pkg]:
        return match.group(0)
    comment = match.group("comment") or ""
    lines = [f"{indent}from {p} import {', '.join(ns)}" for p, ns in groups.items()]
    lines[0] += comment
    return "\n".join(lines)


_PATHS = [(re.compile(r"(?<![\w.])harness/" + re.escape(o) + (r"(?![\w])" if not o.endswith(".py") else r"\b")),
           "harness/" + n) for o, n in _old_module_paths()]
# The mapping itself and its test name old modules on purpose.
SKIP = {Path(__file__).resolve(), ROOT / "tests" / "test_relayout.py"}
_VIEW_LINKS = re.compile(r"(?<![\w.])\.\./\.\./report/views/")


def rewrite_text(text: str) -> str:
    """Every reference to an old module in `text`, rewritten (idempotent)."""
    text = _FROM.sub(_from_import, text)
    text = _DOTTED.sub(_dotted, text)
    for pattern, new in _PATHS:
        text = pattern.sub(new, text)
    return _VIEW_LINKS.sub("../../publish/views/", text)


def rewrite(paths: list[Path]) -> list[Path]:
    """Rewrite the given text files in place; the ones that changed."""
    changed = []
    for path in paths:
        if path.resolve() in SKIP:
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        new = rewrite_text(text)
        if new != text:
            path.write_text(new)
            changed.append(path)
    ruff = Path(sys.executable).with_name("ruff")
    py = [str(p) for p in changed if p.suffix == ".py"]
    if py and ruff.exists():
        subprocess.run([str(ruff), "check", "--quiet", "--select", "I", "--fix", *py], cwd=ROOT, check=False)
    return changed


def _files(args: list[str]) -> list[Path]:
    if not args:
        return [ROOT / p for p in _git("ls-files", "--cached", "--others", "--exclude-standard").splitlines()]
    out = []
    for a in args:
        p = Path(a)
        out += sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
    return out


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("apply", "rewrite"):
        print(__doc__)
        return 2
    if argv[0] == "apply":
        move_files()
    changed = rewrite(_files(argv[1:]))
    print(f"{len(changed)} files rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
