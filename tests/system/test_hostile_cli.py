"""The rest of issue 25 through the command line: secrets in URLs (class 4), interrupts in
the first second (class 7, the general part), writes outside the run (class 8: ONNX
Runtime's telemetry, `--results-dir ''`), and the smaller ones: a huge -k pattern, --set
errors that name --set, integer parameters with an upper bound, a run compared with
itself.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from harness.base.metrics_model import MetricDecl
from harness.infra.redaction import redact
from harness.infra.url_redaction import UNPARSED_URL, note_url_secrets, redact_url_credentials, url_for_display
from harness.model import driver_contract
from harness.model.driver_contract import Metric, Param, Record
from tests import REPO
from tests.conftest import TEST_CLUSTER_PORT
from tests.stored_runs import write_series
from tests.system.test_hostile import SUITE, assert_one_line, cli, write_suite

ENTRY = "import tests.system.test_hostile_cli; from harness.cli import main; main()"


@driver_contract.register(
    "test-hostile-wait",
    metrics=(MetricDecl("waited_s", "s"),),
    params={"seconds": Param(float, 2.0, "how long the case takes", min=0, max=60)},
)
def _wait(ctx):
    """A case that takes `seconds` and writes a raw file."""
    time.sleep(ctx.params["seconds"])
    ctx.raw_path("waited.txt").write_text(f"{ctx.params['seconds']}\n")
    return Record(metrics={"waited_s": Metric(ctx.params["seconds"], "s")})


@driver_contract.register(
    "test-hostile-cluster-ping", metrics=(MetricDecl("pinged", "nodes"),), needs="cluster", params={}
)
def _cluster_ping(ctx):
    ctx.target.client(ctx.target.entry, socket_timeout=3).ping()
    return Record(metrics={"pinged": Metric(1.0, "nodes")})


def _spec(tmp: Path, driver: str = "test-hostile-wait", target: str = "none", **params) -> Path:
    d = {
        "name": "hostile-cli",
        "description": "d",
        "claim": {"section": "0", "text": "t"},
        "target": target,
        "cases": [{"name": "case", "driver": driver, "params": params}],
        "profiles": {"local": {"repetitions": 1}},
    }
    p = tmp / "hostile-cli.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


# ---- class 4: credentials in a URL ------------------------------------------------------
@pytest.mark.parametrize(
    "url,shown",
    [
        ("http://user:password@host:9090", "http://user:***@host:9090"),
        ("https://user:p%40ss%2Fw@prom.example:443/prefix", "https://user:***@prom.example:443/prefix"),
        ("http://u:p@ss@host:1/x@y", "http://u:***@host:1/x@y"),
        ("https://ghp_TOKEN123@host/api", "https://***@host/api"),
        ("HTTP://A:B@H", "HTTP://A:***@H"),
        ("http://host:9090/path@x", "http://host:9090/path@x"),
        ("http://host:9090", "http://host:9090"),
    ],
)
def test_url_credentials_are_hidden(url, shown):
    assert redact_url_credentials(url) == shown
    # a URL that reads two ways (is '/x@y' a path or a password's end?) is never shown at all
    assert url_for_display(url) == (UNPARSED_URL if url.endswith(("/x@y", "/path@x")) else shown)
    assert redact(f"error: could not reach {url} (timeout)") == f"error: could not reach {shown} (timeout)"


def test_a_url_password_is_hidden_wherever_it_appears_later():
    note_url_secrets("http://alice:S3cr%40tPw-25@prom:9090")  # the user's own URL, as it is read
    assert "S3cr" not in redact("auth failed for S3cr@tPw-25 and S3cr%40tPw-25")


def test_prometheus_url_with_credentials_never_reaches_results_report_or_terminal(cluster, tmp_path):
    """A real run with --monitoring on the session cluster and a Prometheus URL with a
    password that does not answer: every file of the run folder and every line printed
    names the URL with *** in place of the password."""
    secret = "Pw-of-issue-25-x7"
    url = f"http://alice:{secret}@127.0.0.1:9/"
    code, out, err = cli(
        "run",
        _spec(tmp_path, "test-hostile-cluster-ping", "cluster"),
        "--monitoring",
        "--base-port",
        TEST_CLUSTER_PORT,
        "--results-dir",
        tmp_path / "r",
        env={"HARNESS_PROMETHEUS_URL": url},
    )
    assert code in (0, 1), err[-2000:]
    assert secret not in out + err
    assert "http://alice:***@127.0.0.1:9" in err
    run_dir = next((tmp_path / "r").iterdir())
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {"results.json", "manifest.json", "report.html", "junit.xml"} <= {p.name for p in files}
    for p in files:
        assert secret.encode() not in p.read_bytes(), p
    mon = json.loads((run_dir / "results.json").read_text())["monitoring"]
    assert mon["status"] == "unavailable" and "alice:***@" in mon["reason"]


class _BasicAuthReady(BaseHTTPRequestHandler):
    token = base64.b64encode(b"alice:p@ss word").decode()

    def do_GET(self):  # noqa: N802 - http.server's name
        ok = self.path == "/-/ready" and self.headers.get("Authorization") == f"Basic {self.token}"
        self.send_response(200 if ok else 401)
        self.end_headers()

    def log_message(self, *a):
        pass


def test_a_prometheus_behind_basic_auth_is_reached_with_the_urls_credentials():
    """http_ok sends the URL's user and password as basic auth (urllib alone would take
    'alice:p@ss' for part of the host and never connect)."""
    from harness.infra.monitoring.stack import http_ok

    server = ThreadingHTTPServer(("127.0.0.1", 0), _BasicAuthReady)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        assert http_ok(f"http://alice:p%40ss%20word@127.0.0.1:{port}/-/ready")
        assert not http_ok(f"http://alice:wrong@127.0.0.1:{port}/-/ready")
        assert not http_ok(f"http://127.0.0.1:{port}/-/ready")
    finally:
        server.shutdown()


# ---- class 7: a Ctrl-C in the first second ---------------------------------------------
@pytest.mark.parametrize("delay", [0.0, 0.01, 0.03, 0.08, 0.2, 0.5])
def test_a_ctrl_c_in_the_first_second_leaves_a_marked_run_or_none(tmp_path, delay):
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, "run", str(_spec(tmp_path, seconds=3)), "--results-dir", str(results)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (results.is_dir() and any(results.iterdir())):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-2000:]
            time.sleep(0.001)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in err, err[-3000:]
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    for run_dir in results.iterdir():  # none left, or each one says it was interrupted
        data = json.loads((run_dir / "results.json").read_text())
        man = json.loads((run_dir / "manifest.json").read_text())
        assert data["interrupted"]["signal"] == "SIGINT" and man["interrupted"]["signal"] == "SIGINT", run_dir
        assert (run_dir / "report.html").is_file()
        assert not (run_dir / ".harness-space-reserve").exists()


# ---- class 8: writes outside the run ----------------------------------------------------
@pytest.mark.parametrize("value", ["", " ", "   "])
def test_an_empty_results_dir_is_bad_input(tmp_path, monkeypatch, value):
    monkeypatch.chdir(tmp_path)
    assert_one_line(cli("run", write_suite(tmp_path / "s.yaml"), "--results-dir", value), (2,), "--results-dir")
    assert_one_line(
        cli("run", write_suite(tmp_path / "s.yaml"), "--results-dir", value, "--dry-run"), (2,), "--results-dir"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def _ort_model() -> Path:
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None:
        pytest.skip("onnxruntime not installed (the experiments extra)")
    return Path(spec.submodule_search_locations[0]) / "datasets" / "mul_1.onnx"


def _run_in_home(home: Path, code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "TF_BUILD", "ORT_TELEMETRY_DISABLED")}
    env["HOME"] = str(home)
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_onnx_runtime_sessions_write_nothing_outside_the_run(tmp_path):
    model = _ort_model()
    control, home = tmp_path / "control-home", tmp_path / "home"
    control.mkdir()
    home.mkdir()
    p = _run_in_home(
        control, f"import onnxruntime as o; o.InferenceSession({str(model)!r}, providers=['CPUExecutionProvider'])"
    )
    assert p.returncode == 0, p.stderr
    if not list(control.rglob("*")):
        pytest.skip("this ONNX Runtime writes no telemetry files at all: nothing to turn off")
    code = (
        "import os, pathlib\n"
        "from harness.experiments.engine_hotload.backend_ort import OrtEngine\n"
        "from harness.mechanisms.onnx_models.runtime import onnxruntime\n"
        f"e = OrtEngine(label='t'); e.load(pathlib.Path({str(model)!r})); e.create_contexts()\n"
        "print(len(e.io()), os.environ.get('TF_BUILD'), onnxruntime().__version__)\n"
    )
    p = _run_in_home(home, code)
    assert p.returncode == 0, p.stderr
    n_io, ci_marker, _ = p.stdout.split()
    assert int(n_io) >= 2 and ci_marker == "None"  # a real session; the CI marker is gone after the import
    assert list(home.rglob("*")) == [], "ONNX Runtime wrote under HOME"


# ---- the smaller ones ------------------------------------------------------------------
@pytest.mark.parametrize("n", [300, 100_000])
def test_a_huge_k_pattern_is_not_echoed_whole(tmp_path, n):
    line = assert_one_line(cli("run", "-k", "x" * n, "--dry-run"), (2,), "-k")
    assert len(line) < 400 and f"{n} characters" in line


def test_a_k_pattern_that_selects_nothing_is_shown_in_full_when_short():
    assert_one_line(cli("run", "-k", "no-such-case-anywhere", "--dry-run"), (2,), "'no-such-case-anywhere'")


@pytest.mark.parametrize(
    "setting,needle",
    [
        ("sim.seed=abc", "--set sim.seed: expected int"),
        ("sim.seed=1.5", "--set sim.seed: expected int"),
        ("sim.seed=[1]", "--set sim.seed: expected int"),
        ("sim.nope=1", "--set sim.nope: case 'sim'"),
        ("sim.sed=1", "did you mean 'seed'"),
        ("sim.seed=" + "9" * 40, "--set sim.seed:"),
    ],
)
def test_set_errors_name_set_not_the_spec_file(tmp_path, setting, needle):
    spec = write_suite(tmp_path / "s.yaml")
    for extra in (["--dry-run"], ["--results-dir", str(tmp_path / "r")]):
        line = assert_one_line(cli("run", spec, "--set", setting, *extra), (2,), needle)
        assert str(spec) not in line and "s.yaml" not in line
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


@pytest.mark.parametrize("value", [10**29, 2**31, -(2**31) - 1, 10**10])
def test_integer_parameters_have_an_upper_bound(tmp_path, value):
    d = json.loads(json.dumps(SUITE))
    d["cases"][0]["params"] = {"seed": value}
    assert_one_line(cli("validate", write_suite(tmp_path / "s.yaml", d)), (2,), "out of range")
    assert_one_line(
        cli("run", write_suite(tmp_path / "t.yaml"), "--set", f"sim.seed={value}", "--dry-run"), (2,), "out of range"
    )
    if value > 0:
        assert_one_line(
            cli("run", "redis-cluster", "--set", f"redis-benchmark.requests={value}", "--dry-run"), (2,), "out of range"
        )


def test_integer_parameters_up_to_the_bound_pass(tmp_path):
    assert cli("run", write_suite(tmp_path / "s.yaml"), "--set", f"sim.seed={2**31 - 1}", "--dry-run")[0] == 0


def test_a_run_compared_with_itself_is_refused(tmp_path):
    a, b = write_series(tmp_path / "runs", 2)
    line = assert_one_line(cli("compare", a, a), (2,), "compared with itself")
    assert "same folder" in line
    assert_one_line(cli("compare", a, tmp_path / "runs" / ".." / "runs" / a.name), (2,), "compared with itself")
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(a, copy)
    assert_one_line(cli("compare", copy, a), (2,), "same run")
    assert_one_line(cli("report", a, "--baseline", a), (2,), "compared with itself")
    assert cli("compare", a, b)[0] in (0, 1)


# ---- issue 53, point 7: --dry-run makes the real run's checks; its lines are safe ---------
def _dry_run(*args, env: dict | None = None) -> tuple[int, str, str]:
    p = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--dry-run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize(
    "args,env,needle",
    [
        (("--base-port", "65535", "redis-cluster"), {}, "base port 65535"),
        (("serving",), {"HARNESS_ENGINE_PORT": "65535"}, "HARNESS_ENGINE_PORT"),
        (("serving",), {"HARNESS_ENGINE_KV_GIB": "nan"}, "HARNESS_ENGINE_KV_GIB"),
        (("serving",), {"HARNESS_LLM_URL": "http://127.0.0.1:0", "HARNESS_LLM_MODEL": "m"}, "port 0"),
    ],
)
def test_dry_run_refuses_what_the_real_run_refuses(args, env, needle):
    code, out, err = _dry_run(*args, env=env)
    assert_one_line((code, out, err), (2,), needle)
    assert "dry run: nothing was started" not in out


def test_dry_run_shows_the_results_dir_with_its_escapes_visible():
    code, out, err = _dry_run("--results-dir", "r\x1b]0;owned\x07\x1b[2J", "eviction/trace")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "results: a new folder under r\\x1b]0;owned\\x07\\x1b[2J" in out
