"""Hostile input (issue 15): every broken or malicious input gives one line and exit 2 (or 3
for the environment), never a traceback; names are data (escaped, never paths); the report
runs no script whatever the names; aliases, NaN and infinities are refused.

The command line is called in-process through `harness.cli.main` (SystemExit captured), as
a user's shell would call it; a fuzz test (hypothesis) throws generated specs, --set values
and results folders at it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base.paths import REPO_ROOT
from harness.cli import main
from harness.model import ledger, spec

SUITE = {
    "name": "hostile",
    "description": "d",
    "claim": {"section": "1", "text": "t"},
    "target": "none",
    "cases": [{"name": "sim", "driver": "eviction-simulate", "params": {}}],
    "profiles": {"local": {"repetitions": 1}},
}


def cli(*args, env: dict | None = None) -> tuple[int, str, str]:
    """Run the command line in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(a) for a in args])
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return code, out.getvalue(), err.getvalue()


def assert_one_line(result, codes=(2,), needle: str = ""):
    code, out, err = result
    assert "Traceback" not in err + out, err
    assert code in codes, (code, err[-1000:])
    lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    assert needle in lines[0], lines[0]
    return lines[0]


def write_suite(path: Path, data=None, **changes) -> Path:
    d = json.loads(json.dumps(data or SUITE))
    d.update(changes)
    path.write_text(yaml.safe_dump(d))
    return path


# ---- item 7: one line and exit 2/3 for each broken input ---------------------------------
def _results_folder(tmp: Path, results: bytes | str, manifest: bytes | str = "{}") -> Path:
    d = tmp / "run"
    d.mkdir(exist_ok=True)
    for name, content in (("results.json", results), ("manifest.json", manifest)):
        (d / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return d


def _inventory(tmp: Path, hosts_yaml: str, group_vars: str | None = None) -> Path:
    inv = tmp / "inventory"
    inv.mkdir(exist_ok=True)
    (inv / "hosts.yml").write_text("all:\n  children:\n    redis:\n" + hosts_yaml)
    if group_vars is not None:
        (inv / "group_vars").mkdir(exist_ok=True)
        (inv / "group_vars" / "all.yml").write_text(group_vars)
    return inv / "hosts.yml"


BAD = {
    "binary spec": (lambda t: ["validate", _write(t / "s.yaml", b"\x00\x01\x02name: x")], "binary"),
    "non-UTF-8 spec": (lambda t: ["validate", _write(t / "s.yaml", "name: caf\xe9\n".encode("latin-1"))], "UTF-8"),
    "folder as spec": (lambda t: ["validate", _mkdir(t / "s.yaml")], "is a folder"),
    "device as spec": (lambda t: ["validate", "/dev/zero"], "not a regular file"),
    "non-string key": (
        lambda t: ["validate", _write(t / "s.yaml", yaml.safe_dump({**SUITE, 1: 2}).encode())],
        "must be text",
    ),
    "non-string param key": (
        lambda t: [
            "validate",
            write_suite(t / "s.yaml", cases=[{"name": "sim", "driver": "eviction-simulate", "params": {3: 4}}]),
        ],
        "keys must be text",
    ),
    "null parameter": (
        lambda t: [
            "validate",
            write_suite(t / "s.yaml", cases=[{"name": "sim", "driver": "eviction-simulate", "params": {"seed": None}}]),
        ],
        "got null",
    ),
    "integer too large for a float": (
        lambda t: [
            "validate",
            _write(
                t / "s.yaml",
                (yaml.safe_dump(SUITE) + "")
                .replace(
                    "repetitions: 1",
                    "repetitions: 1\n    thresholds: [{case: sim, metric: m, "
                    "op: '<', value: " + "9" * 400 + ", reason: r}]",
                )
                .encode(),
            ),
        ],
        "too large",
    ),
    "--set integer too large for a float": (
        lambda t: ["run", write_suite(t / "s.yaml"), "--dry-run", "--set", "sim.head_fraction=" + "9" * 400],
        "too large",
    ),
    "--set empty value": (lambda t: ["run", write_suite(t / "s.yaml"), "--dry-run", "--set", "sim.seed="], "empty"),
    "--set YAML alias": (
        lambda t: ["run", write_suite(t / "s.yaml"), "--dry-run", "--set", "sim.seed=[&a 1, *a]"],
        "aliases",
    ),
    "--results-dir is a file": (
        lambda t: ["run", write_suite(t / "s.yaml"), "--results-dir", _write(t / "f", b"x")],
        "is a file",
    ),
    "--results-dir unreachable": (
        lambda t: ["run", write_suite(t / "s.yaml"), "--results-dir", "/proc/1/nope"],
        "cannot create",
    ),
    "--results-dir read-only": (
        lambda t: ["run", write_suite(t / "s.yaml"), "--results-dir", "/proc/sys/harness-results"],
        "cannot create",
    ),
    "results.json is a list": (lambda t: ["report", _results_folder(t, "[]")], "expected a JSON object"),
    "results.json has no records": (lambda t: ["report", _results_folder(t, '{"schema_version": 2}')], "records"),
    "results.json unknown status": (
        lambda t: [
            "report",
            _results_folder(
                t,
                json.dumps(
                    {
                        "schema_version": 2,
                        "records": [{"suite": "a", "case": "b", "repetition": 1, "status": "weird", "reason": "x"}],
                    }
                ),
            ),
        ],
        "status",
    ),
    "binary manifest": (
        lambda t: ["report", _results_folder(t, '{"schema_version": 2, "records": []}', b"\x00\xff\xfe")],
        "manifest",
    ),
    "inventory hosts are a list": (
        lambda t: [
            "run",
            "redis-cluster",
            "--results-dir",
            t / "r",
            "--target",
            _inventory(t, "      hosts: [a, b]\n"),
        ],
        "hosts",
    ),
    "inventory group_vars broken": (
        lambda t: [
            "run",
            "redis-cluster",
            "--results-dir",
            t / "r",
            "--target",
            _inventory(t, "      hosts: {n1: {ansible_host: 127.0.0.1}}\n", "a: [unclosed\n"),
        ],
        "group_vars",
    ),
    "inventory group_vars a list": (
        lambda t: [
            "run",
            "redis-cluster",
            "--results-dir",
            t / "r",
            "--target",
            _inventory(t, "      hosts: {n1: {ansible_host: 127.0.0.1}}\n", "- a\n- b\n"),
        ],
        "group_vars",
    ),
    "port 99999 (cluster up)": (lambda t: ["cluster", "up", "--base-port", "99999"], "99999"),
    "port 99999 (run)": (lambda t: ["run", "redis-cluster", "--base-port", "99999", "--results-dir", t / "r"], "99999"),
    "monitoring port 99999": (
        lambda t: ["run", "redis-cluster", "--monitoring", "--results-dir", t / "r"],
        "HARNESS_MONITORING_PORT",
    ),
    "suite named twice": (
        lambda t: [
            "run",
            "redis-cluster",
            REPO_ROOT / "harness" / "experiments" / "redis_cluster" / "suite.yaml",
            "--dry-run",
        ],
        "named twice",
    ),
}
ENV = {"monitoring port 99999": {"HARNESS_MONITORING_PORT": "99999"}}


def _write(p: Path, data: bytes) -> Path:
    p.write_bytes(data)
    return p


def _mkdir(p: Path) -> Path:
    p.mkdir()
    return p


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_is_one_line_never_a_traceback(name, tmp_path):
    make_args, needle = BAD[name]
    args = make_args(tmp_path)
    line = assert_one_line(cli(*args, env=ENV.get(name)), (2,), needle)
    if args[0] == "run" and "--results-dir" in args:  # refused before anything was measured: no run folder
        r = Path(args[args.index("--results-dir") + 1])
        assert not r.is_dir() or not any(r.iterdir()), f"{name}: a run folder was left for input refused: {line}"


def test_integer_too_large_for_a_bounded_parameter():
    from harness.base.errors import BadInput
    from harness.model.driver_contract import Param

    with pytest.raises(BadInput, match=r"must be at most 10, got 999999999999\.\.\. \(400 digits\)"):
        Param(int, 1, "x", max=10).check("w", int("9" * 400))
    with pytest.raises(BadInput, match="must be at least 1, got -5"):
        Param(int, 1, "x", min=1).check("w", -5)


def test_unresolvable_host_is_not_a_busy_port():
    line = assert_one_line(cli("cluster", "up", "--host", "no-such-host.invalid", "--base-port", "7590"), (2,))
    assert "does not resolve" in line and "busy" not in line
    line = assert_one_line(cli("cluster", "up", "--host", "192.0.2.1", "--base-port", "7590"), (2,))
    assert "not an address of this machine" in line and "busy" not in line


# ---- item 8: alias bomb ------------------------------------------------------------------
def test_alias_bomb_refused_at_load(tmp_path):
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [*{chr(96 + i)}" + f",*{chr(96 + i)}" * 8 + "]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    assert bomb.stat().st_size < 1024
    t0 = time.monotonic()
    assert_one_line(cli("validate", bomb), (2,), "aliases")
    assert_one_line(cli("run", bomb, "--dry-run"), (2,), "aliases")
    assert time.monotonic() - t0 < 30  # the bound is "it ends": 9**9 strings would never


# ---- item 9: NaN and infinities ----------------------------------------------------------
@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_non_finite_threshold_refused(tmp_path, value):
    text = yaml.safe_dump(SUITE).replace(
        "repetitions: 1",
        f"repetitions: 1\n    thresholds: [{{case: sim, metric: m, op: '<', value: {value}, reason: r}}]",
    )
    assert_one_line(cli("validate", _write(tmp_path / "s.yaml", text.encode())), (2,), "finite")


def test_nan_never_written(tmp_path):
    from harness.model.stored_run import Record, Series, load_run, write_manifest, write_results

    rec = Record(
        suite="s",
        case="c",
        repetition=1,
        details={"x": float("nan"), "y": [float("inf"), 1.0]},
        series={"n": Series({"a": [1.0, float("nan")]})},
    )
    write_manifest(tmp_path, {"run_id": "r"})
    write_results(tmp_path, [rec], {}, [])

    def refuse(c):
        raise AssertionError(f"{c} in results.json")

    data = json.loads((tmp_path / "results.json").read_text(), parse_constant=refuse)
    assert data["records"][0]["details"] == {"x": None, "y": [None, 1.0]}
    assert load_run(tmp_path).records[0].series["n"].columns["a"] == [1.0, None]


# ---- item 3: names that become paths -----------------------------------------------------
@pytest.mark.parametrize(
    "where,value",
    [
        ("case", "../../../tmp/x"),
        ("case", "a/b"),
        ("case", ".."),
        ("suite", "../x"),
        ("suite", "x\x00y"),
        ("profile", "../../p"),
        ("case", "<script>"),
        ("case", "a b"),
    ],
)
def test_names_that_become_paths_refused_at_validation(tmp_path, where, value):
    d = json.loads(json.dumps(SUITE))
    if where == "case":
        d["cases"][0]["name"] = value
    elif where == "suite":
        d["name"] = value
    else:
        d["profiles"] = {value: {"repetitions": 1}}
    assert_one_line(cli("validate", write_suite(tmp_path / "s.yaml", d)), (2,), "not allowed")


def test_raw_files_stay_in_the_run_folder(tmp_path):
    from harness.model.driver_contract import CaseContext, Target

    ctx = CaseContext("s", "c", 1, "local", {}, tmp_path / "raw" / "s" / "c" / "rep1", Target("none"))
    for bad in ("../x", "../../../../tmp/x", "/etc/passwd", "a/b", "..", "", "a\\b"):
        with pytest.raises(ValueError):
            ctx.raw_path(bad)
    assert ctx.raw_path("ok.txt").parent == ctx.raw_dir


def test_runner_refuses_a_case_that_would_write_outside(tmp_path):
    """Names in a Plan that bypassed the spec checks still cannot leave the run folder."""
    from harness.base.errors import BadInput
    from harness.run.runner import run_case
    from harness.run.selection import make_plans

    s = spec.parse_suite(json.loads(json.dumps(SUITE)))
    plan = make_plans([s], "local", 1, {})[0]
    case = spec.Case("../../../escaped", "eviction-simulate")
    run_dir = tmp_path / "results" / "run"
    (run_dir / "raw").mkdir(parents=True)
    with pytest.raises(BadInput, match="outside the results folder"):
        run_case(plan, case, 1, "local", None, run_dir, log=lambda m: None)
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "results" / "escaped").exists()


# ---- item 2: the report runs no script ---------------------------------------------------
XSS_MARK = "pwn" + "ed42"  # what a payload would write; it never appears in the page as text
PAYLOADS = [
    "\"><img src=x onerror=\"document.body.setAttribute('data-x','pwn'+'ed42')\">",
    "'\" onload=\"document.body.setAttribute('data-x','pwn'+'ed42')\" x='",
    "<script>document.body.setAttribute('data-x','pwn'+'ed42')</script>",
    "<svg onload=\"document.body.setAttribute('data-x','pwn'+'ed42')\">",
    "javascript:document.body.setAttribute('data-x','pwn'+'ed42')",
]


def hostile(i: int) -> str:
    return PAYLOADS[i % len(PAYLOADS)]


def hostile_run(tmp_path: Path) -> Path:
    """A results folder with a hostile string in every field that reaches the report."""
    from harness.model.stored_run import Metric, Record, Series, write_manifest, write_results

    suite, case, metric = hostile(0), hostile(1), hostile(2)
    h = [hostile(i) for i in range(10)]
    srun = spec.SuiteRun(
        suite,
        h[3],
        spec.SuiteClaim("1" + h[4], h[0], ["C1"], h[1]),
        "none",
        "local",
        h[2],
        2,
        [spec.Case(case, "eviction-simulate", h[3], {"p": h[4]}), spec.Case(h[3], "eviction-simulate", h[0], {})],
        [spec.Threshold(case, metric, "<", 1.0, h[1], h[2]), spec.Threshold(case, h[4], ">", 1.0, "", h[0])],
        {h[0]: h[1]},
    )
    claim = ledger.Claim(
        "C1",
        h[2],
        h[3],
        [ledger.ClaimCheck(suite, case, metric, ">=", 1.0, h[4], controls=[ledger.Control(h[0], "<", h[1], 5.0)])],
        differs=h[4],
        figures={},
    )
    records = []
    for rep in (1, 2):
        records.append(
            Record(
                suite=suite,
                case=case,
                repetition=rep,
                metrics={metric: Metric(0.5 * rep, h[0], "lower", h[1]), h[2]: Metric(3.0, h[3])},
                raw_files=[f"raw/{h[4]}", h[4], "/etc/passwd"],
                details={"ran_on": h[0]},
                params={"p": h[1]},
                started=0.0,
                duration_s=0.1,
                series={h[3]: Series({h[4]: [h[0], h[1]], h[2]: [1.0, 2.0]}, {h[2]: h[3]}, h[4])},
            )
        )
    records.append(Record(suite=suite, case=h[3], repetition=1, status="failed", reason=h[4]))
    records.append(Record(suite=suite, case=h[3], repetition=2, status="skipped", reason=h[0]))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_manifest(
        run_dir,
        {
            "run_id": h[0],
            "profile": h[1],
            "target": h[2],
            "started": 1.0,
            "ended": 2.0,
            "host": {"cpu_model": h[3], "kernel": h[4]},
            "tools": {h[0]: {"version": h[1]}},
            "packages": {h[2]: h[3]},
            "servers": {h[4]: {"redis_version": h[0], "role": h[1]}},
        },
    )
    mon = {
        "status": "ok",
        "reason": h[2],
        "roles": {h[3]: h[4]},
        "queries": [
            {
                "key": "ops",
                "title": h[0],
                "unit": h[1],
                "label": "node",
                "series": [{"name": h[3], "points": [[0, 1.0], [1, 2.0]]}],
            }
        ],
    }
    write_results(
        run_dir, records, {suite: srun}, [claim], monitoring=mon, interrupted={"at": 1.5, "case": h[1], "signal": h[2]}
    )
    return run_dir


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts, self.handlers, self.urls, self.csp = 0, [], [], ""

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self.scripts += 1
        for k, v in attrs:
            if k.lower().startswith("on"):
                self.handlers.append((tag, k, v))
            if k.lower() in ("href", "src", "xlink:href", "action") and v and ":" in v.split("/")[0]:
                self.urls.append((tag, k, v))
        if tag == "meta" and dict(attrs).get("http-equiv") == "Content-Security-Policy":
            self.csp = dict(attrs).get("content", "")


def test_report_with_hostile_names_has_no_markup_from_them(tmp_path):
    run_dir = hostile_run(tmp_path)
    code, out, err = cli("report", run_dir)
    assert code == 0 and "Traceback" not in err, err
    html = (run_dir / "report.html").read_text()
    p = _Elements()
    p.feed(html)
    assert p.scripts == 0, "no <script> element"
    assert p.handlers == [], p.handlers[:3]
    assert p.urls == [], p.urls[:3]
    assert "default-src 'none'" in p.csp and "script-src" not in p.csp.replace("default-src", "")
    assert "INTERRUPTED" in html
    assert "&lt;script&gt;" in html  # the names are shown, as text


def test_svg_attributes_escape_quotes():
    """The issue's reproduction: a quote in a chart title broke out of aria-label."""
    from harness.publish.svg import chart

    p = _Elements()
    p.feed(
        chart(
            hostile(0) + hostile(1),
            [{"name": hostile(3), "points": [[hostile(1), 1.0], [hostile(0), 2.0]]}],
            hostile(2),
            hostile(4),
            kind="bar",
        )
    )
    assert p.handlers == [] and p.scripts == 0


def test_report_with_hostile_names_runs_no_script_in_chromium(tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium not installed (apt-get install chromium)")
    run_dir = hostile_run(tmp_path)
    assert cli("report", run_dir)[0] == 0
    html = (run_dir / "report.html").read_text()
    assert XSS_MARK not in html
    # the same page without its CSP: what the escaping alone does
    bare = run_dir / "bare.html"
    bare.write_text(html.replace('http-equiv="Content-Security-Policy"', 'name="no-csp"'))
    # a control: the browser does run an inline handler when the markup is not escaped
    control = run_dir / "control.html"
    control.write_text(
        "<html><body><img src=x onerror=\"document.body.setAttribute('data-x','pwn'+'ed42')\"></body></html>"
    )
    dom = {}
    for page in (run_dir / "report.html", bare, control):
        p = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--virtual-time-budget=3000",
                "--dump-dom",
                f"file://{page}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr[-500:]
        dom[page.name] = p.stdout
    assert XSS_MARK in dom["control.html"], "the control must show a handler running, else the check proves nothing"
    assert "Claims ledger" in dom["report.html"]
    assert XSS_MARK not in dom["report.html"]
    assert XSS_MARK not in dom["bare.html"]


# ---- item 6: an interrupted run reads as one ---------------------------------------------
def test_report_command_renders_an_interrupted_run_as_interrupted(tmp_path):
    from harness.model.stored_run import Record, write_manifest, write_results

    s = spec.parse_suite(json.loads(json.dumps(SUITE)))
    write_manifest(tmp_path, {"run_id": "r", "started": 1.0, "ended": 2.0})
    write_results(
        tmp_path,
        [Record(suite="hostile", case="sim", repetition=1)],
        {"hostile": s.as_run("local", 2, {"sim": {}})},
        [],
        interrupted={"at": 1.5, "case": "hostile/sim/repetition 2", "signal": "SIGTERM"},
    )
    code, out, err = cli("report", tmp_path)
    assert code == 0, err
    html = (tmp_path / "report.html").read_text()
    assert "INTERRUPTED" in html and "hostile/sim/repetition 2" in html and "SIGTERM" in html
    assert (tmp_path / "junit.xml").exists()


# ---- item 11: the same suite twice -------------------------------------------------------
def test_same_suite_twice_refused():
    assert_one_line(cli("run", "redis-cluster", "redis-cluster", "--dry-run"), (2,), "named twice")


# ---- the fuzz test: generated specs, --set values and results folders --------------------
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**300, max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["../../x", "<script>", "\"'", "a/b", "", ".nan", "*a", "&a", "\x00"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers(), st.none()), inner, max_size=4),
    ),
    max_leaves=12,
)
FIELDS = ["name", "description", "claim", "target", "cases", "profiles"]
FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def _check_cli(result):
    code, out, err = result
    assert "Traceback" not in err + out, err
    assert code in (0, 2, 3), (code, err[-1500:])
    if code:
        assert len([line for line in err.strip().splitlines() if line.startswith("error:")]) == 1, err


@FUZZ
@given(
    field=st.sampled_from(FIELDS + ["cases.0", "cases.0.params", "profiles.local", "claim.text", "extra"]), value=values
)
def test_fuzz_spec_fields(tmp_path, field, value):
    d = json.loads(json.dumps(SUITE))
    obj, key = d, field
    if "." in field:
        head, *mid, key = field.split(".")
        obj = d[head]
        for m in mid:
            obj = obj[int(m)] if isinstance(obj, list) else obj[m]
        key = int(key) if isinstance(obj, list) else key
    obj[key] = value
    f = tmp_path / "fuzz.yaml"
    try:
        f.write_text(yaml.dump(d, allow_unicode=True))
    except (yaml.YAMLError, UnicodeEncodeError):
        return
    _check_cli(cli("validate", f))


@FUZZ
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(lambda s: s.encode("utf-8", "surrogatepass"))))
def test_fuzz_spec_bytes(tmp_path, raw):
    f = tmp_path / "raw.yaml"
    f.write_bytes(raw)
    _check_cli(cli("validate", f))


SET_VALUES = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ["", " ", "[&a 1, *a]", "{", ".nan", "-.inf", "9" * 400, "null", "~", "!!python/object:os.system", "&a x"]
    ),
)
SET_PARAMS = st.sampled_from(["seed", "nope", "", "sim", "a.b"])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=SET_VALUES, param=SET_PARAMS)
def test_fuzz_set_values_cli(tmp_path, value, param):
    """Through the command line (each call loads every suite: few examples)."""
    if "\x00" in value:
        return  # an argv cannot hold a NUL
    f = write_suite(tmp_path / "s.yaml")
    _check_cli(cli("run", f, "--dry-run", "--set", f"sim.{param}={value}"))


@settings(max_examples=200, deadline=None)
@given(value=SET_VALUES, param=SET_PARAMS, case=st.sampled_from(["sim", "", "nope"]))
def test_fuzz_set_values_plan(value, param, case):
    """The same parse and check that `run` does before anything starts: BadInput or a plan."""
    from harness.base.errors import BadInput
    from harness.run.selection import make_plans, parse_overrides

    s = spec.parse_suite(json.loads(json.dumps(SUITE)))
    try:
        plans = make_plans([s], "local", None, parse_overrides([f"{case}.{param}={value}"]))
    except BadInput as e:
        assert "\n" not in str(e) and str(e)
        return
    assert plans[0].params("sim")[param] is not None


@FUZZ
@given(results=values, manifest=values, records=st.lists(values, max_size=3))
def test_fuzz_results_folder(tmp_path, results, manifest, records):
    d = tmp_path / "fuzzrun"
    d.mkdir(exist_ok=True)
    data = results if not isinstance(results, dict) else {**results, "schema_version": 2, "records": records}
    try:
        (d / "results.json").write_text(json.dumps(data))
        (d / "manifest.json").write_text(json.dumps(manifest))
    except (TypeError, ValueError):
        return
    _check_cli(cli("report", d))


def test_wrong_password_is_named_not_provision_it_first(tmp_path):
    """An inventory's Redis refuses REDIS_CLUSTER_PASSWORD: the line says so."""
    if not shutil.which("redis-server"):
        pytest.skip("redis-server not installed")
    from harness.infra.redis_server import RedisProcess

    port = 7591
    server = RedisProcess("127.0.0.1", port, tmp_path / "redis", config={"requirepass": "right-one"}).start()
    try:
        inv = _inventory(tmp_path, f"      hosts: {{n1: {{ansible_host: 127.0.0.1, redis_cluster_port: {port}}}}}\n")
        line = assert_one_line(
            cli(
                "run",
                "redis-cluster",
                "--target",
                inv,
                "--results-dir",
                tmp_path / "r",
                env={"REDIS_CLUSTER_PASSWORD": "wrong-one"},
            ),
            (2,),
            "password",
        )
        assert "provision it first" not in line and "wrong-one" not in line
    finally:
        server.stop()


@pytest.mark.parametrize("host", ["../../../tmp/x", "a/b", "..", "<script>", ""])
def test_cluster_host_is_never_a_path(host):
    """--host becomes part of the state folder's name: anything but an address is refused."""
    for cmd in ("up", "down", "status"):
        assert_one_line(cli("cluster", cmd, "--host", host, "--base-port", "7590"), (2,), "--host")


def _paths(o, prefix=()):
    """Every (path, value) inside a JSON document."""
    yield prefix
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _paths(v, prefix + (i,))


_VALID_RUN: dict = {}


def _valid_run_json(tmp: Path) -> tuple[dict, dict]:
    """results.json and manifest.json of a small, valid folder (the hostile one)."""
    if not _VALID_RUN:
        (tmp / "valid").mkdir(parents=True, exist_ok=True)
        d = hostile_run(tmp / "valid")
        _VALID_RUN["results"] = json.loads((d / "results.json").read_text())
        _VALID_RUN["manifest"] = json.loads((d / "manifest.json").read_text())
    return json.loads(json.dumps(_VALID_RUN["results"])), json.loads(json.dumps(_VALID_RUN["manifest"]))


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(which=st.sampled_from(["results", "manifest"]), pick=st.integers(min_value=0), value=values)
def test_fuzz_results_field(tmp_path, which, pick, value):
    """One field anywhere in a valid results folder replaced by a generated value: the
    report command renders it or says in one line what is damaged."""
    results, manifest = _valid_run_json(tmp_path)
    doc = results if which == "results" else manifest
    paths = [p for p in _paths(doc) if p]
    path = paths[pick % len(paths)]
    obj = doc
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value
    d = tmp_path / "mutated"
    d.mkdir(exist_ok=True)
    (d / "results.json").write_text(json.dumps(results))
    (d / "manifest.json").write_text(json.dumps(manifest))
    _check_cli(cli("report", d))


@pytest.mark.parametrize("which", ["results", "manifest"])
@pytest.mark.parametrize("value", [10**400, []], ids=["int-past-float", "list"])
def test_every_field_of_a_results_folder_replaced_is_no_traceback(tmp_path, which, value):
    """Every field of a valid folder in turn replaced by one value: the report renders it or
    names what is damaged in one line. The fuzzer above samples fields; this sweep found what
    it had missed: an int past a float's range (JSON allows any size) in the manifest's times,
    a metric or a series (OverflowError), a threshold's op as a number, a list as a
    threshold's case (unhashable), a number as the monitoring block's roles."""
    results, manifest = _valid_run_json(tmp_path)
    doc = results if which == "results" else manifest
    d = tmp_path / "mutated"
    d.mkdir()
    for path in [p for p in _paths(doc) if p]:
        mutated = json.loads(json.dumps(doc))
        obj = mutated
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
        (d / "results.json").write_text(json.dumps(mutated if which == "results" else results))
        (d / "manifest.json").write_text(json.dumps(mutated if which == "manifest" else manifest))
        code, out, err = cli("report", d)
        assert "Traceback" not in err + out and code in (0, 2), (path, code, err[-800:])


@pytest.mark.parametrize("which", ["results", "manifest"])
def test_an_integer_of_more_digits_than_python_reads_is_one_line(tmp_path, which):
    """json.loads refuses an integer of over 4300 digits with a ValueError that is not a
    JSONDecodeError: it was a traceback; it is one line naming the file, exit 2."""
    results, manifest = _valid_run_json(tmp_path)
    d = tmp_path / "huge"
    d.mkdir()
    texts = {"results": json.dumps(results), "manifest": json.dumps(manifest)}
    texts[which] = texts[which][:-1] + ', "huge": ' + "1" * 5000 + "}"
    for name, text in texts.items():
        (d / f"{name}.json").write_text(text)
    code, out, err = cli("report", d)
    assert code == 2 and "Traceback" not in err + out, err[-800:]
    (line,) = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert f"{which}.json: not valid JSON" in line and len(line) < 400, line
