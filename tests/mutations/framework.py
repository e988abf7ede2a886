"""Code mutations of the project, judged by the ledger (issue 39, point 8).

A mutation changes the code of a mechanism or an instrument in a temporary copy of the
checkout (never the checkout itself), runs the affected case in that copy at its smallest
size (`harness run SUITE/CASE --repeat 1`), and reads the verdicts the run wrote
(verdicts.json in the results folder, what a user would see). The kind of the mutation says
which verdicts the ledger may give for the checks it names:

- broken (the mechanism broken in a way that still works) and stand-in (a cheaper stand-in
  for the named mechanism): never "reproduced", "direction reproduced, magnitude differs" or
  "exceeded";
- blinded (an instrument that cannot see): "inconclusive";
- improved (the mechanism better than claimed): never "not reproduced";
- unexercised (issue 52: the dangerous situation never arises in the run, so a check of an
  absence has nothing to judge) and dependent (a reference quietly made to share code with
  what it checks: the run's record of what the reference imports must see it, whatever the
  numbers say): "inconclusive";
- weakened (a stand-in quietly made weaker): never "reproduced", "direction reproduced,
  magnitude differs" or "exceeded".

Each suite's mutations live in tests/mutations/catalog_<suite>.py (MUTATIONS); see
tests/mutations/catalog.py and the runner, `python -m tests.mutations.run`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# The checkout the copies are made of; MUTATIONS_ROOT names another tree (a git repository)
# to copy instead, e.g. an export of a known-good revision while the checkout is mid-change.
ROOT = Path(os.environ.get("MUTATIONS_ROOT") or Path(__file__).resolve().parents[2])

KINDS = ("broken", "stand-in", "blinded", "improved", "unexercised", "dependent", "weakened")
# The kinds whose checks must not read as a success, and those that must read inconclusive.
NEVER_SUCCESS = ("broken", "stand-in", "weakened")
MUST_BE_INCONCLUSIVE = ("blinded", "unexercised", "dependent")
# Verdicts that judge nothing here: the check's conditions are not what this machine has. A
# mutation all of whose checks get one is skipped with the reason (it needs the lab).
NOT_JUDGED_HERE = ("not comparable here", "not measurable here")
# What a broken mechanism or a stand-in must never be called.
SUCCESS = ("reproduced", "direction reproduced, magnitude differs", "exceeded")

# Ports: the mutation suite's range is 9600-9899, 100 ports per pytest-xdist worker (gw0 9600,
# gw1 9700, gw2 9800), so two workers' mutations never meet. Inside a worker's block: the
# run's own cluster at +0..+5 (bus ports +10000), the suites' own clusters at +20..+99 of it
# (failover +20..+28, cold-start's port_offset), the engines at +50 (HARNESS_ENGINE_PORT), and
# PostgreSQL (cold-start's pg_port) at +60.
# MUTATIONS_PORT_FIRST moves the whole range (another 300 ports), for a run beside the suite's own.
PORT_FIRST = int(os.environ.get("MUTATIONS_PORT_FIRST") or 9600)
PORTS_PER_WORKER = 100
PORT_LAST = PORT_FIRST + 3 * PORTS_PER_WORKER - 1
ENGINE_OFFSET, PG_OFFSET = 50, 60
# Suite -> the case parameter that names a fixed port of its own, and the offset it gets.
PORT_PARAMS = {"cold-start": (("pg_port", PG_OFFSET),)}
# What a copy links from the checkout's .harness instead of building its own: the converted
# models and ONNX exports (tens of seconds each) and the serving engine's venv (minutes).
SHARED_STATE = ("cache", "engine/venv")
LOG_TAIL = 3000  # characters of a failed run's output kept in a message


@dataclass(frozen=True)
class Edit:
    path: str  # relative to the repository root
    old: str  # must occur exactly once in that file of the copy
    new: str


@dataclass(frozen=True)
class Mutation:
    name: str  # "suite/short-name", unique
    claim: str  # "C20"
    kind: str  # one of KINDS
    what: str  # one line for the ledger's table: what the change does
    edits: tuple  # tuple[Edit, ...]
    run: str  # "SUITE/CASE", run in the copy with --repeat 1
    checks: tuple  # "suite/case metric" strings: the ledger checks it must break
    sets: tuple = ()  # extra "CASE.PARAM=VALUE" overrides (--set) for the smallest useful size
    fast: bool = False  # True: runs in `make test` (under ~60 s); all run in `make mutations`
    timeout_s: int = 600
    xfail_reason: str = ""  # not caught by today's ledger: the test xfails (strictly) with this reason
    xfail_strict: bool = True  # False: caught or not depending on the machine's noise (say so in the reason)
    pack: str = ""  # a shipped claim pack whose ledger judges it (run with --pack and its setup); '' = the seed's

    @property
    def suite(self) -> str:
        return self.run.split("/", 1)[0]


@dataclass
class Outcome:
    """What one mutation's run gave: the verdicts of its checks, or why it could not be judged."""

    mutation: Mutation
    seconds: float = 0.0
    verdicts: dict = field(default_factory=dict)  # "suite/case metric" -> (verdict, reason)
    skipped: str = ""  # the case was skipped here, with the reason
    error: str = ""  # the run did not give verdicts (stale edit, crash, timeout), with why
    run_dir: Path | None = None
    log: str = ""  # the run's output

    def failures(self) -> list[str]:
        """The checks whose verdict the mutation's kind does not allow, one message each."""
        return judge(self.mutation, self.verdicts)


def worker_ports(worker: str | None = None) -> tuple[int, int, int]:
    """(cluster base port, engine port, PostgreSQL port) of this pytest-xdist worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "") if worker is None else worker
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    base = PORT_FIRST + PORTS_PER_WORKER * index
    if base + PORTS_PER_WORKER - 1 > PORT_LAST:
        raise RuntimeError(f"worker {worker}: the mutation suite's ports {PORT_FIRST}-{PORT_LAST} hold 3 workers")
    return base, base + ENGINE_OFFSET, base + PG_OFFSET


IMPORT_RE = re.compile(r"^\s*from (harness(?:\.\w+)*) import ([\w ,]+?)\s*(?:#.*)?$", re.M)


def _missing_imports(text: str, root: Path) -> list[str]:
    """`from harness.X import name` lines of a mutant's new text whose module or name no
    longer exists in `root` (a module moved since the mutation was written: its mutant would
    stop at its import, and the run would test nothing)."""
    out = []
    for module, names in IMPORT_RE.findall(text):
        base = root / module.replace(".", "/")
        source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if not source.is_file():
            out.append(f"module {module} does not exist")
            continue
        defined = source.read_text(encoding="utf-8")
        for name in (n.split(" as ")[0].strip() for n in names.split(",")):
            own = (base / f"{name}.py").is_file() or (base / name).is_dir()
            if not own and not re.search(rf"^(def |class |async def )?{name}\b|\b(import|as) {name}\b", defined, re.M):
                out.append(f"{module} has no {name}")
    return out


def stale_edits(m: Mutation, root: Path = ROOT) -> list[str]:
    """Why the mutation's edits no longer fit the files of `root` (empty: they do): an edit's
    old text must occur once, the mutated file must still compile, and every module its new
    text imports must still be there."""
    out = []
    for e in m.edits:
        f = root / e.path
        if not f.is_file():
            out.append(f"{m.name}: {e.path} does not exist")
            continue
        text = f.read_text(encoding="utf-8")
        n = text.count(e.old)
        if n != 1:
            out.append(f"{m.name}: the edit's old text occurs {n} times in {e.path} (must be once): {e.old[:80]!r}")
            continue
        if e.path.endswith(".py"):
            try:
                compile(text.replace(e.old, e.new), e.path, "exec")
            except SyntaxError as err:
                out.append(f"{m.name}: the mutated {e.path} does not compile: {err.msg} (line {err.lineno})")
        out += [f"{m.name}: {e.path}: the edit imports what is gone: {why}" for why in _missing_imports(e.new, root)]
    return out


def tracked_files(root: Path = ROOT) -> list[str]:
    """The working tree as it is: tracked and untracked files that git does not ignore."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True, check=True, timeout=60
    )
    return [p for p in out.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def copy_checkout(dest: Path, root: Path = ROOT) -> Path:
    """Copy the checkout's working tree into `dest` and link the checkout's SHARED_STATE (models,
    exports and the engine's venv are not rebuilt for every mutant); everything else under
    .harness (pids, port locks, server folders) is the copy's own. A file deleted but still
    tracked is left out."""
    for rel in tracked_files(root):
        src = root / rel
        if not src.exists() and not src.is_symlink():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            target.symlink_to(os.readlink(src))
        elif src.is_file():
            shutil.copy2(src, target)
    for rel in SHARED_STATE:
        src = root / ".harness" / rel
        if src.is_dir():
            (dest / ".harness" / rel).parent.mkdir(parents=True, exist_ok=True)
            if rel == "cache":
                link_tree(src, dest / ".harness" / rel)
            else:
                (dest / ".harness" / rel).symlink_to(src)
    return dest


def link_tree(src: Path, dest: Path) -> None:
    """The checkout's build cache as real folders of links to its files: a mutant that builds
    a file anew (the cache writes a temporary and renames it into place) writes into the
    copy's folder, never into the checkout's cache that later runs would use."""
    for folder, _dirs, files in os.walk(src):
        here = dest / Path(folder).relative_to(src)
        here.mkdir(parents=True, exist_ok=True)
        for name in files:
            (here / name).symlink_to(Path(folder) / name)


def apply_edits(m: Mutation, copy: Path) -> None:
    """Apply the edits to the copy; a stale edit raises (the checkout is never touched)."""
    problems = stale_edits(m, copy)
    if problems:
        raise AssertionError("stale mutation: " + "; ".join(problems))
    for e in m.edits:
        f = copy / e.path
        f.write_text(f.read_text(encoding="utf-8").replace(e.old, e.new, 1), encoding="utf-8")


def copy_env(copy: Path) -> dict:
    """The environment of a run in the copy: the copy first on the import path, own engine port."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy)
    env["HARNESS_ENGINE_PORT"] = str(worker_ports()[1])
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def assert_imports_copy(copy: Path, cwd: Path) -> None:
    """The interpreter really imports the copy's harness (an editable install could shadow
    PYTHONPATH, and a mutant would then silently run the unmutated code)."""
    out = subprocess.run(
        [sys.executable, "-c", "import harness, sys; sys.stdout.write(harness.__file__)"],
        cwd=cwd,
        env=copy_env(copy),
        capture_output=True,
        text=True,
        timeout=60,
    )
    where = Path(out.stdout.strip() or "?").resolve()
    if not where.is_relative_to(copy.resolve()):
        raise AssertionError(
            f"the copy is not what gets imported: harness comes from {where} (PYTHONPATH={copy}); {out.stderr[-500:]}"
        )


def harness_command(m: Mutation, results: Path) -> list[str]:
    """`harness run SUITE/CASE --repeat 1` at the worker's ports, with the mutation's --set."""
    base, _, pg = worker_ports()
    case = m.run.split("/", 1)[1]
    sets = list(m.sets) + [f"{case}.{param}={base + off}" for param, off in PORT_PARAMS.get(m.suite, ())]
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "run",
        m.run,
        "--repeat",
        "1",
        "--base-port",
        str(base),
        "--results-dir",
        str(results),
    ]
    for s in sets:
        cmd += ["--set", s]
    if m.pack:  # the pack's setup under the mutation's --set, judged by the pack's ledger
        cmd += ["--pack", m.pack]
    return cmd


def _run_bounded(cmd: list[str], cwd: Path, env: dict, timeout_s: int, log: Path) -> int | None:
    """Run `cmd` in its own process group, output to `log`; None when it ran past timeout_s
    (the whole group is then stopped: TERM, then KILL)."""
    with open(log, "wb") as out:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
                try:
                    os.killpg(p.pid, sig)
                    p.wait(timeout=wait)
                    break
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
            return None


def stop_leftovers(copy: Path, wait_s: float = 5.0) -> list[int]:
    """Stop the processes a run in `copy` left behind (a run cut short leaves its redis-server
    and postgres processes, which detach from its process group). A process is the run's only
    when it is proven so, never by its name or command line: its working folder is inside the
    copy (the harness starts every server in its own state folder there) and it started after
    the copy was made; it is signalled through harness.infra.ownership (a pidfd opened before the
    check, the start time checked again). Returns their pids."""
    from harness.infra import ownership

    root = os.path.realpath(copy)
    made = os.stat(root).st_mtime - 1.0
    btime = _boot_time()
    ticks = os.sysconf("SC_CLK_TCK")

    def inside(proc) -> bool:
        cwd = ownership.cwd_of(proc.pid)
        return (
            ownership.start_time(proc.pid) == proc.start
            and cwd is not None
            and (cwd == root or cwd.startswith(root + os.sep))
        )

    found = []
    for pid, _ppid, _pgid, start in ownership.scan():
        proc = ownership.Proc(pid, start)
        if pid != os.getpid() and btime + start / ticks >= made and inside(proc):
            found.append(proc)
    ownership.terminate(found, lambda proc: Path(root), timeout=wait_s, check=inside)
    return [proc.pid for proc in found]


def _boot_time() -> float:
    """The kernel's boot time (seconds since the epoch), from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


def read_outcome(m: Mutation, results: Path, out: Outcome) -> Outcome:
    """Fill `out` from the results folder the run wrote: its verdicts.json, or the skip."""
    runs = sorted(d for d in results.iterdir() if d.is_dir()) if results.is_dir() else []
    if not runs:
        out.error = "the run wrote no results folder"
        return out
    out.run_dir = runs[-1]
    suite, case = m.run.split("/", 1)
    data = json.loads((out.run_dir / "results.json").read_text()) if (out.run_dir / "results.json").exists() else {}
    recs = [r for r in data.get("records") or [] if (r.get("suite"), r.get("case")) == (suite, case)]
    if recs and all(r.get("status") == "skipped" for r in recs):
        out.skipped = "; ".join(sorted({str(r.get("reason") or "skipped") for r in recs}))
        return out
    broken = [r for r in recs if r.get("status") in ("failed", "invalid")]
    if broken or not recs:
        # a mutant that crashes the case tests the crash handling, not the ledger
        why = "; ".join(sorted({str(r.get("reason") or r.get("status")) for r in broken})) or "no record of the case"
        out.error = f"the case did not run through in the mutated copy: {why}"
        return out
    vfile = out.run_dir / "verdicts.json"
    if not vfile.exists():
        out.error = f"the run wrote no {vfile.name}"
        return out
    for claim in json.loads(vfile.read_text())["claims"]:
        for c in claim.get("checks") or []:
            out.verdicts[f"{c['suite']}/{c['case']} {c['metric']}"] = (c["verdict"], c.get("reason", ""))
    mine = [out.verdicts[c] for c in m.checks if c in out.verdicts]
    if mine and len(mine) == len(m.checks) and all(v in NOT_JUDGED_HERE for v, _ in mine):
        out.skipped = "the ledger does not judge its checks here: " + "; ".join(
            f"{v} ({r[:200]})" for v, r in dict.fromkeys(mine)
        )
    return out


def run_mutation(m: Mutation, keep: Path | None = None) -> Outcome:
    """Copy the checkout, apply the mutation, run its case there from a folder outside the
    checkout, and read the verdicts. `keep`: a folder to keep the copy, log and results in."""
    start = time.monotonic()
    out = Outcome(m)
    work = Path(tempfile.mkdtemp(prefix="mutation-", dir=keep)) if keep else Path(tempfile.mkdtemp(prefix="mutation-"))
    work.chmod(0o755)  # run as root, PostgreSQL (cold-start) drops to the postgres user, who must reach its folder
    try:
        copy = copy_checkout(work / "copy")
        apply_edits(m, copy)
        (work / "cwd").mkdir()
        assert_imports_copy(copy, work / "cwd")
        log = work / "run.log"
        rc = _run_bounded(harness_command(m, work / "results"), work / "cwd", copy_env(copy), m.timeout_s, log)
        read_outcome(m, work / "results", out)
        text = log.read_text(errors="replace")
        if rc is None:  # a run cut short judges nothing, whatever it wrote before
            out.error, out.skipped = f"the run took longer than {m.timeout_s} s", ""
        if out.error:
            out.error += f" (exit {rc}); the run's output ends:\n{text[-LOG_TAIL:]}"
        out.log = text
    finally:
        if (work / "copy").is_dir():
            stop_leftovers(work / "copy")
        out.seconds = time.monotonic() - start
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return out


def judge(m: Mutation, verdicts: dict) -> list[str]:
    """One message per check of `m` whose verdict its kind forbids (or that has no verdict)."""
    out = []
    for chk in m.checks:
        if chk not in verdicts:
            out.append(f"{m.name}: {chk}: no verdict for this check in verdicts.json")
            continue
        verdict, reason = verdicts[chk]
        if m.kind in NEVER_SUCCESS:
            bad, want = verdict in SUCCESS, "never " + " / ".join(SUCCESS)
        elif m.kind in MUST_BE_INCONCLUSIVE:
            bad, want = verdict != "inconclusive", "inconclusive"
        else:
            bad, want = verdict == "not reproduced", "never not reproduced"
        if bad:
            out.append(f"{m.name} ({m.kind}): {chk}: verdict {verdict!r}, the kind needs {want}; reason: {reason}")
    return out
