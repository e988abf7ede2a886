"""Hostile input, fifth round (issue 63, items 4 and 7): bad input is never "a bug", and no
secret reaches a line.

- A stored manifest's claim pack (name, title, source with its quotes) of the wrong type is
  one line naming manifest.json and the field, exit 2; every other manifest field the report
  reads, fuzzed (numbers, lists, nulls, nested objects, huge strings), reads as absent or is
  refused in one line: `harness report` and `harness measurements` never exit 3 for it and
  never call it a bug.
- Running out of memory is the environment's limit (one line, exit 3), not a bug: a real
  `harness report` under an address-space limit reading a large results.json.
- Redaction hides the values of secrets but never the word after a path that merely holds
  'secret' or 'passwd'; a token in the path of HARNESS_LLM_URL is in no line and no file of
  a real `harness run`.

The command line runs as a real process (`python -m harness`) on copies of a stored run
(tests/fixtures/results-v3-manifest-v1), or in-process (harness.cli.main) where a test runs
it hundreds of times.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT
from harness.infra.redaction import redact
from harness.infra.url_redaction import url_for_display
from tests import REPO, TESTS
from tests.system.test_hostile import cli
from tests.system.test_hostile_counters import _free_base_port

STORED = TESTS / "fixtures" / "results-v3-manifest-v1" / "run"
PACK = {
    "name": "a-pack",
    "title": "a paper's claims",
    "source": {
        "kind": "paper",
        "title": "The paper",
        "url": "https://example.org/paper",
        "no_url": "",
        "quotes": [{"text": "caching halves the time to first token", "where": "section 4"}],
    },
}
# Every fuzzed value, one of each kind a hand-edited file holds where another is expected.
HUGE = "x" * 1_000_000
FUZZ = (5, -1.5e308, True, None, [1, [2]], [{"k": 1}], {"a": {"b": 1}}, "", HUGE, "\x1b]52;c;aGk=\x07")


def _harness(*args, env: dict | None = None, preexec_fn=None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real command line, as a user's shell runs it."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


def _error_line(out: str, err: str) -> str:
    """The one `error:` line of a run (and no traceback)."""
    assert "Traceback" not in out + err, err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err[-2000:]
    return lines[0]


def _stored_run(tmp_path: Path, manifest: dict | None = None, name: str = "run") -> Path:
    """A copy of a real stored run, its manifest replaced by `manifest` when given."""
    run = tmp_path / name
    shutil.copytree(STORED, run)
    if manifest is not None:
        (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def _manifest() -> dict:
    return json.loads((STORED / "manifest.json").read_text())


def _put(d, path: tuple, value) -> None:
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value


def _with(path: tuple, value, base: dict | None = None) -> dict:
    man = copy.deepcopy(base if base is not None else {**_manifest(), "pack": PACK})
    _put(man, path, value)
    return man


# ---- item 4: the manifest's pack block is checked when it is read back -------------------
PACK_CASES = [  # (the field, a value of another type, what the line calls the value)
    (("pack", "source", "quotes"), 5, "a number"),  # the example: a TypeError, exit 3
    (("pack",), [PACK], "a list"),
    (("pack",), None, "null"),
    (("pack",), "a-pack", "a string"),
    (("pack", "name"), 7, "a number"),
    (("pack", "name"), {"a": {"b": 1}}, "an object"),
    (("pack", "title"), None, "null"),
    (("pack", "source"), "https://example.org", "a string"),
    (("pack", "source", "kind"), ["paper"], "a list"),
    (("pack", "source", "url"), -1.5e308, "a number"),
    (("pack", "source", "quotes"), HUGE, "a string"),
    (("pack", "source", "quotes"), {"text": "t", "where": "w"}, "an object"),
    (("pack", "source", "quotes", 0), "caching halves it", "a string"),
    (("pack", "source", "quotes", 0, "text"), True, "a boolean"),
    (("pack", "source", "quotes", 0, "where"), [1, [2]], "a list"),
]


@pytest.mark.parametrize("field,value,kind", PACK_CASES, ids=lambda v: str(v)[:30])
def test_a_pack_block_of_the_wrong_type_is_one_line_naming_manifest_json_and_the_field(tmp_path, field, value, kind):
    run = _stored_run(tmp_path, _with(field, value))
    p = _harness("report", run)
    line = _error_line(p.stdout, p.stderr)
    assert p.returncode == EXIT_BAD_INPUT, p.stderr[-2000:]
    name = ".".join(str(k) for k in field).replace(".0", "[0]")
    assert f"{run / 'manifest.json'}: {name} is {kind}" in line, line
    assert "bug" not in line and len(line) < 600 and HUGE not in line
    assert not (run / "report.html").exists() and not (run / "report-error.txt").exists()


def test_a_good_pack_block_with_huge_strings_is_reported_bounded(tmp_path):
    """Huge strings where strings belong are no error: the report shows them cut."""
    man = _with(("pack", "title"), "T" * 3_000_000)
    _put(man, ("pack", "source", "quotes", 0, "text"), "Q" * 2_000_000)
    run = _stored_run(tmp_path, man)
    p = _harness("report", run)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    html = (run / "report.html").read_text()
    assert "a-pack" in html and "T" * 300 in html and "Q" * 400 in html
    assert "T" * 301 not in html and "Q" * 401 not in html and len(html) < 1_000_000


# fields keyed by a name (a tool, an address, a module): the first one stands for the others
BY_NAME = ("tools", "packages", "servers", "host_identity", "references", "suite_wall_s", "engines", "hosts")
KINDS = (5, None, [1, [2]], {"a": {"b": 1}}, HUGE)  # one value of each kind (a boolean: in FUZZ)


def _paths(o, pre: tuple = ()):
    """Every field of a manifest down to four levels, the first item of each list and the
    first entry of a field keyed by names."""
    if isinstance(o, dict):
        items = list(o.items())[:1] if pre[:1] and pre[0] in BY_NAME and len(pre) == 1 else o.items()
        for k, v in items:
            yield pre + (k,)
            if len(pre) < 3 and pre != ("packages",):
                yield from _paths(v, pre + (k,))
    elif isinstance(o, list) and o and len(pre) < 5:
        yield pre + (0,)
        yield from _paths(o[0], pre + (0,))


def _rich_manifest() -> dict:
    """The stored run's manifest with every field a report reads filled in as a run writes it."""
    man = {**_manifest(), "pack": copy.deepcopy(PACK)}
    man["gpu"] = {"present": True, "driver": "550.54", "gpus": [{"name": "NVIDIA H100", "memory_total_mib": 81559}]}
    man["target_nodes"]["nodes"] = [{"host": "127.0.0.1", "port": 7000, "role": "primary"}]
    man["loadgen"] = {"address": "10.0.0.2", "others": [{"address": "10.0.0.3"}]}
    man["servers"] = {"127.0.0.1:7000": {"redis_version": "7.0.15", "role": "master"}}
    man["hosts"] = {"redis": ["10.0.0.1"]}
    man["engines"] = {"cached": {"base_url": "http://127.0.0.1:8011", "model": "m"}}
    man["interrupted"] = {"case": "kv-trace/recount", "at": 1.0, "signal": "SIGINT"}
    man["constraints"]["differs"] = {"redis": "8.0.0 (pinned 8.1.0)"}
    man["references"]["harness.experiments.kv_trace.recount"]["reaches"] = ["harness.experiments.eviction"]
    return man


def _fuzz_cases() -> list[tuple[tuple, object]]:
    """The pack's every field with every value of FUZZ; every other field that holds an
    object or a list (what a reader iterates), every top-level field and each wall time,
    with a value of each kind."""
    man = _rich_manifest()
    out = []
    for path in _paths(man):
        value = man
        for k in path:
            value = value[k]
        if path[0] == "pack":
            out += [(path, v) for v in FUZZ]
        elif len(path) == 1 or isinstance(value, (dict, list)) or path[0] == "suite_wall_s":
            out += [(path, v) for v in KINDS]
    return out


def test_every_manifest_field_the_report_reads_fuzzed_is_read_or_refused_in_one_line(tmp_path):
    """A manifest whose constraints diff, GPU list, nodes, load generators, wall times or
    pack hold another type made `harness report` (and `harness measurements`) exit 3 with a
    TypeError called a bug. Every such value now reads as absent (exit 0) or, in the pack, is
    one line naming manifest.json (exit 2)."""
    base = _rich_manifest()
    cases = _fuzz_cases()
    assert len(cases) > 300
    run = _stored_run(tmp_path, name="fuzzed")
    seen = set()
    for path, value in cases:
        (run / "manifest.json").write_text(json.dumps(_with(path, value, base)))
        for command in ("report", "measurements"):
            code, out, err = cli(command, run)
            assert code in (0, EXIT_BAD_INPUT), (path, str(value)[:40], command, code, err[-1000:])
            assert "bug" not in err and "Traceback" not in err, (path, str(value)[:40], err[-1000:])
            if code == EXIT_BAD_INPUT:
                line = _error_line(out, err)
                assert path[0] in ("pack", "format_version"), (path, line)  # the others read as absent
                assert line.startswith(f"error: {run / 'manifest.json'}: {path[0]}"), (path, line)
            seen.add(code)
            if code == EXIT_BAD_INPUT:
                break  # measurements reads the manifest as report does
        for name in ("report.html", "junit.xml", "verdicts.json"):
            (run / name).unlink(missing_ok=True)
    assert seen == {0, EXIT_BAD_INPUT}


@pytest.mark.parametrize(
    "field,value",
    [
        (("constraints", "differs"), "redis 8.0"),
        (("gpu", "gpus"), 5),
        (("gpu", "gpus", 0), "NVIDIA H100"),
        (("target_nodes", "nodes"), True),
        (("loadgen", "others"), 1.5),
        (("suite_wall_s", "kv-trace"), "5 s"),
        (("references", "harness.experiments.kv_trace.recount", "reaches"), 3),
    ],
    ids=lambda v: str(v)[:40],
)
def test_a_damaged_fact_of_the_manifest_reads_as_absent_in_the_real_cli(tmp_path, field, value):
    run = _stored_run(tmp_path, _with(field, value, _rich_manifest()))
    for command in ("report", "measurements"):
        p = _harness(command, run)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "error" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert (run / "report.html").is_file() and not (run / "report-error.txt").exists()


# ---- item 4: out of memory is the environment's, never a bug ----------------------------
LIMIT = 768 << 20  # address space: far above what a report of the stored run needs (under 200 MB)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def test_out_of_memory_reading_a_large_results_file_is_one_line_exit_3_and_no_bug(tmp_path):
    """A MemoryError was 'the harness failed (MemoryError: ); this is a bug in the harness'.
    Under a real address-space limit, a results.json within the size bound (90 MB) whose 30
    million empty lists need gigabytes once parsed: one line, out of memory, the environment."""
    small = _stored_run(tmp_path, name="small")
    control = _harness("report", small, preexec_fn=_limited)  # the limit itself leaves room for a report
    assert control.returncode == 0, control.stderr[-2000:]
    big = _stored_run(tmp_path, name="big")
    with open(big / "results.json", "wb") as f:
        f.write(b'{"schema_version": 3, "records": [], "pad": [')
        f.write(b"[]," * 30_000_000)
        f.write(b"[]]}")
    p = _harness("report", big, preexec_fn=_limited)
    line = _error_line(p.stdout, p.stderr)
    assert p.returncode == EXIT_ENVIRONMENT, p.stderr[-2000:]
    assert line.startswith("error: out of memory") and "(environment)" in line, line
    assert "bug" not in p.stderr and "MemoryError" not in p.stderr and "traceback" not in p.stderr.lower()
    assert not (big / "report.html").exists() and not (big / "report-error.txt").exists()


def test_a_memory_error_while_the_report_is_built_is_the_environment_not_a_bug(tmp_path):
    """Out of memory past loading (the analysis, a chart, the page): the report's own guard
    called every exception a bug and kept a traceback; a MemoryError is the environment's.
    The real entry point (harness.cli.main(), argv from sys.argv) in its own process, with
    the page's rendering made to run out of memory."""
    run = _stored_run(tmp_path)
    code = (
        "import sys\n"
        "import harness.publish.outputs as out\n"
        "from harness.cli import main\n"
        "def render_report(*a, **k):\n"
        "    raise MemoryError\n"
        "out.render_report = render_report\n"
        f"sys.argv = ['harness', 'report', {str(run)!r}]\n"
        "main()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    line = _error_line(p.stdout, p.stderr)
    assert p.returncode == EXIT_ENVIRONMENT and line.startswith("error: out of memory (environment)"), p.stderr
    assert "bug" not in p.stderr and not (run / "report-error.txt").exists()


def test_a_small_file_read_under_a_memory_limit_never_reserves_the_whole_bound(tmp_path):
    """read_bounded read `limit + 1` bytes at once, which reserves the whole bound (256 MiB for
    results.json) for a 20 KB file: under a 300 MB address-space limit a tiny run's report
    was 'out of memory'. Now it reads what the file holds, in chunks up to the bound."""
    small = tmp_path / "small.json"
    small.write_bytes(b"x" * 20_000)
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (300 << 20, 300 << 20))\n"
        "from harness.base.files import read_bounded\n"
        f"data = read_bounded({str(small)!r}, 1 << 30, 'a test file')\n"
        "sys.exit(0 if data == b'x' * 20_000 else 4)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]


# ---- item 7: redaction hides secrets' values, not the words after a path -----------------
@pytest.mark.parametrize(
    "line",
    [
        "/home/u/secrets/pack.yaml: claim C1 has no check",
        "/etc/passwd: no such results folder; give a folder written by 'harness run'",
        "/tmp/my-secret: no such file (the manifest)",
        "/srv/password_store/run: manifest.json is missing",
        "C:\\Users\\u\\secrets\\passwd: cannot be read",
        "secrets.yaml: claim C1 has no check",
        "results/secret-run/manifest.json: pack.source.quotes is a number, not a list",
        "--target /etc/ansible/secrets/token: no such inventory file",
    ],
)
def test_a_path_naming_a_secret_keeps_the_word_after_it(line):
    assert redact(line) == line


@pytest.mark.parametrize(
    "line,secret",
    [
        ("PASSWORD=hunter2x and more", "hunter2x"),
        ("redis.password: Tr0ub4dor then", "Tr0ub4dor"),
        ("api_key='sk-live-93jf8Hq' failed", "sk-live-93jf8Hq"),
        ("connect http://alice:pa55-w0rd@10.0.0.1:8000/v1 refused", "pa55-w0rd"),
        ("got Basic " + base64.b64encode(b"alice:pa55-w0rd").decode() + " back", "YWxpY2U6cGE1NS13MHJk"),
        ("Authorization: Bearer abcdef0123456789xyz", "abcdef0123456789xyz"),
        ("GET http://10.0.0.1:8000/v1/models?api_key=k3y-v4lue-9 failed", "k3y-v4lue-9"),
        ("GET http://10.0.0.1:8000/t/sk-abc123XYZdefGHI456/v1/models: refused", "sk-abc123XYZdefGHI456"),
        ("at http://10.0.0.1:8000/token/q9w8e7r6t5/v1.", "q9w8e7r6t5"),
        ("at http://10.0.0.1:8000/v2/0123456789abcdef0123456789abcdef/openai", "0123456789abcdef0123456789abcdef"),
        ("login failed for username/password: default/s3cret", "default/s3cret"),
        ("./PASSWORD=hunter2", "hunter2"),
        ("config/api_key=abc12345", "abc12345"),
        ("dir\\PASSWORD=hunter2", "hunter2"),
    ],
)
def test_the_values_of_secrets_are_still_hidden(line, secret):
    shown = redact(line, known=False)
    assert secret not in shown and shown.replace("***", secret) == line, shown  # the secret alone, no word more


def test_a_model_path_or_an_endpoint_id_in_a_url_is_no_token():
    for url in (
        "http://gpu1:8000/meta-llama/Meta-Llama-3.1-70B-Instruct/v1",
        "https://api.runpod.ai/v2/abc123xyz0/openai/v1",
        "http://h:8000/auth/login/v1",
        "http://h:8000/sk-learn-models/v1",
        "https://github.com/kvcache-ai/Mooncake/blob/0845448a1b2c3d4e5f60718293a4b5c6d7e8f901/README.md",
        "https://huggingface.co/BAAI/bge-small-en-v1.5/resolve/5c38ec7c405ec4b44b94cc5a9bb96e735b38267a/onnx/model.onnx",
    ):
        assert url_for_display(url) == url


def test_a_path_with_secret_in_its_name_keeps_its_error_in_the_real_cli(tmp_path):
    """`harness report .../secrets/passwd` (no such folder): the line said
    '.../passwd: *** such results folder'."""
    missing = tmp_path / "secrets" / "passwd"
    p = _harness("report", missing)
    line = _error_line(p.stdout, p.stderr)
    assert p.returncode == EXIT_BAD_INPUT and f"{missing}: no such results folder; give a folder" in line, line


# ---- item 7: a token in HARNESS_LLM_URL's path is never echoed ---------------------------
TOKEN = "sk-abc123XYZdefGHI456jkl"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once the socket is: nothing answers there


def test_a_token_in_the_llm_url_path_is_in_no_line_and_no_file_of_a_real_run(tmp_path):
    """HARNESS_LLM_URL=http://127.0.0.1:PORT/t/sk-.../v1 and nothing answers there: every
    line the run prints (the engine in use, each failed repetition, the summary) and every
    file of its results folder shows the path's token as ***."""
    port = _closed_port()
    env = {"HARNESS_LLM_URL": f"http://127.0.0.1:{port}/t/{TOKEN}/v1", "HARNESS_LLM_MODEL": "smollm2"}
    results = tmp_path / "r"
    p = _harness(
        "run",
        "serving/prefix-cache",
        "--set",
        "prefix-cache.duration_s=5",
        "--base-port",
        _free_base_port(),
        "--results-dir",
        results,
        env=env,
        timeout=300,
    )
    assert p.returncode == EXIT_ENVIRONMENT and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert TOKEN not in p.stdout + p.stderr and TOKEN[3:15] not in p.stdout + p.stderr
    assert f"127.0.0.1:{port}/t/***/v1/models" in p.stderr, p.stderr[-3000:]  # the failure names the server
    files = [f for f in results.rglob("*") if f.is_file()]
    assert any(f.name == "report.html" for f in files)
    for f in files:
        assert TOKEN.encode() not in f.read_bytes(), f


@pytest.mark.parametrize(
    "url,env_model",
    [
        (f"http://127.0.0.1:{{port}}/t/{TOKEN}/v1", ""),  # refused for the missing model
        (f"http://127.0.0.1:{{port}}/v1?api_key={TOKEN}", "smollm2"),  # refused for its query
        (f"http://127.0.0.1:{{port}}/v1;token={TOKEN}", "smollm2"),  # refused for its path parameter
    ],
    ids=("path", "query", "path-parameter"),
)
def test_a_refused_llm_url_shows_no_token(url, env_model):
    env = {"HARNESS_LLM_URL": url.format(port=_closed_port()), "HARNESS_LLM_MODEL": env_model}
    p = _harness("run", "serving/prefix-cache", "--dry-run", env=env)
    line = _error_line(p.stdout, p.stderr)
    assert p.returncode == EXIT_BAD_INPUT and "HARNESS_LLM_URL" in line, line
    assert TOKEN not in p.stdout + p.stderr and TOKEN[3:15] not in p.stdout + p.stderr
