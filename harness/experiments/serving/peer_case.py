"""The case of driver `serving-client-vs-vllm` (the peer): vLLM's own benchmark client
(`vllm.benchmarks.serve`, its TimedTrace dataset on a Mooncake-format slice) and the harness's
client on the same server and the same requests: the token-id prompts vLLM's dataset builds
(PYTHONHASHSEED fixed, dumped by harness/experiments/serving/vllm_peer.py in the engine's
venv), sent at the same trace times. The two clients take turns, their order alternating per
repetition. The server is the engine with prefix caching off where the run has one, so that the
second client does not find the first one's prompts cached."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness.base import stats
from harness.experiments.serving.series import PEER_REQUESTS
from harness.infra.model_wheels import smollm2_dir
from harness.infra.redaction import redact, redact_file, redact_json
from harness.infra.serving_engine import install
from harness.infra.url_redaction import note_url_secrets
from harness.model.driver_contract import INPUT_FILE, CaseContext, Metric, Param, Record

from . import client, engines, summary
from .prefix_case import slice_records

PEER_SCRIPT = Path(__file__).with_name("vllm_peer.py")
RESULT_PREFIX = "vllm_bench_"  # vLLM's own result files (vllm_peer.py names them vllm_bench_K.json)
HASH_SEED = "0"
PARAMS = {
    "trace": Param(str, "data/mooncake/conversation_trace.jsonl", "a Mooncake-format JSONL trace", kind=INPUT_FILE),
    "session_fraction": Param(float, 0.004, "the slice: this fraction of the trace's sessions", min=1e-6, max=1.0),
    "session_seed": Param(int, 1, "seed of the session sample"),
    "max_requests": Param(int, 12, "the slice's first N requests", min=2),
    "rounds": Param(int, 3, "rounds per client, the two clients alternating round by round", min=1),
    "chunk_tokens": Param(int, 16, "tokens per hash id (vLLM's --timed-trace-chunk-hash-size)", min=1),
    "max_prompt_tokens": Param(int, 384, "prompts are cut here", min=16),
    "output_tokens": Param(int, 16, "tokens generated per request (ignore_eos, as vLLM's client sends)", min=2),
    "duration_s": Param(float, 10.0, "the slice's timestamps scaled to span this many seconds", min=1.0),
    "tokenizer": Param(
        str,
        "",
        "the served model's tokenizer folder for vLLM's client (default: the shipped SmolLM2 folder the engine serves)",
    ),
    "agree_pct": Param(float, 10.0, "the medians agree when within this many percent", min=0.0),
    "instrument_delay_ms": Param(
        float,
        150.0,
        "the instrument: the harness's client run again with this wait "
        "between each dispatch and its POST (a known late client)",
        min=0.0,
    ),
    "timeout_s": Param(float, 300.0, "vLLM's client's time limit (its import takes tens of seconds)", min=10.0),
}


def scaled_slice(p: dict, path: Path) -> int:
    """The slice as vLLM's TimedTrace reads it: lengths scaled to chunk_tokens per hash id and
    cut at max_prompt_tokens, timestamps rebased and scaled to span duration_s (ms; the
    multiplier 0.001 makes them seconds)."""
    recs, _ = slice_records(p)
    t0, span = recs[0]["timestamp"], max(1, recs[-1]["timestamp"] - recs[0]["timestamp"])
    ct = p["chunk_tokens"]
    with path.open("w") as f:
        for r in recs:
            n = min(-(-r["input_length"] * ct // 512), len(r["hash_ids"]) * ct, p["max_prompt_tokens"])
            f.write(
                json.dumps(
                    {
                        "timestamp": round((r["timestamp"] - t0) / span * p["duration_s"] * 1000, 3),
                        "input_length": n,
                        "output_length": p["output_tokens"],
                        "hash_ids": r["hash_ids"][: -(-n // ct)],
                    }
                )
                + "\n"
            )
    return len(recs)


class Peer:
    """vLLM's benchmark client in its own process (the engine's venv), its rounds started one
    at a time by the harness (a file handshake), so that the two clients alternate round by
    round while vLLM's import (tens of seconds) is paid once. Always stopped on the way out.

    Secrets: the client needs the server's URL with its credentials (and OPENAI_API_KEY, its
    Bearer token, from the environment), and it prints its arguments. What it reads is a
    config in the handshake folder (private, removed afterwards). What is kept under raw/ is
    redacted: vllm_bench.config.json when written, vllm_bench.stdout and .stderr line by
    line as they come (no copy with a secret is ever written there), its result files when
    it ends."""

    def __init__(self, ctx, cfg: dict, p: dict):
        self.ctx, self.cfg, self.p = ctx, cfg, p
        self.hs = Path(cfg["handshake_dir"])
        for name in ("prompts_out", "out"):  # what an earlier run left must not be taken for this one's
            Path(cfg[name]).unlink(missing_ok=True)
        note_url_secrets(cfg["base_url"])
        ctx.raw_path("vllm_bench.config.json").write_text(json.dumps(redact_json(cfg), indent=1))
        path = self.hs / "vllm_bench.config.json"  # what the client reads: with the credentials, never kept
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(cfg, f)
        env = {**os.environ, "PYTHONHASHSEED": HASH_SEED, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
        self.proc = subprocess.Popen(
            [str(install.venv_python()), str(PEER_SCRIPT), str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self.keepers = [
            _keep(self.proc.stdout, ctx.raw_path("vllm_bench.stdout")),
            _keep(self.proc.stderr, ctx.raw_path("vllm_bench.stderr")),
        ]

    def _until(self, path: Path) -> None:
        end = time.monotonic() + self.p["timeout_s"]
        while not path.exists():
            if self.proc.poll() is not None and not path.exists():
                raise engines.EngineDown(
                    f"vLLM's benchmark client exited with code {self.proc.returncode}: {self._tail()}"
                )
            if time.monotonic() > end:
                raise engines.EngineDown(
                    f"vLLM's benchmark client did not get to {path.name} within {self.p['timeout_s']:.0f} s"
                )
            time.sleep(0.05)

    def _tail(self) -> str:
        for t in self.keepers:  # the client has exited: what it wrote last is kept within moments
            t.join(timeout=5)
        lines = self.ctx.raw_path("vllm_bench.stderr").read_text(errors="replace").strip().splitlines()
        return redact(" | ".join(lines[-3:])) or "(no output)"

    def prompts(self) -> list[dict]:
        self._until(Path(self.cfg["prompts_out"]))
        return json.loads(Path(self.cfg["prompts_out"]).read_text())

    def round(self, k: int) -> None:
        (self.hs / f"go-{k}").touch()
        self._until(self.hs / f"done-{k}")

    def results(self) -> list[dict]:
        self._until(Path(self.cfg["out"]))
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        res = json.loads(Path(self.cfg["out"]).read_text())
        return [res[k] for k in sorted(res, key=int)]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        for t in self.keepers:
            t.join(timeout=10)
        # the files the client wrote itself: its result (serve.main's dicts, their error
        # strings) and vLLM's own result files
        for f in [Path(self.cfg["out"]), *Path(self.cfg["result_dir"]).glob(f"{RESULT_PREFIX}*.json")]:
            redact_file(f)


def _keep(pipe, path: Path) -> threading.Thread:
    """A thread that writes what the child prints to `path`, each line redacted as it comes
    (vLLM's client prints its arguments, the URL with its credentials among them)."""

    def pump():
        with pipe, path.open("wb") as out:
            for line in iter(lambda: pipe.readline(1 << 20), b""):
                out.write(redact(line.decode(errors="surrogateescape")).encode(errors="surrogateescape"))
                out.flush()

    t = threading.Thread(target=pump, name=f"keep {path.name}", daemon=True)
    t.start()
    return t


def _harness(ep, prompts: list[dict], tag: str, delay_ms: float = 0.0) -> list[client.Result]:
    reqs = [
        client.Request(
            float(x["timestamp"]),
            x["prompt"],
            int(x["output_len"]),
            tag,
            True,
            {"repetition_penalty": 1.0},
            delay_ms / 1000,
        )
        for x in prompts
    ]
    return client.run(ep.base_url, ep.model, reqs, timeout_s=120, stall_s=60)


@engines.fails_when_down
def run(ctx: CaseContext) -> Record:
    p = ctx.params
    if not install.venv_python().exists():
        return Record(
            "failed",
            f"vLLM's benchmark client needs the engine's venv ({install.venv_python()} "
            f"is missing): {install.INSTALL_HINT}",
        )
    ep = engines.pick_off(ctx.target, ctx.raw_dir)
    engines.warm_up(ep, ctx.log)
    with tempfile.TemporaryDirectory(prefix="harness-peer-") as hs:
        peer_rounds, mine, late, order = _rounds(ctx, p, ep, hs)
    out = _outcome(ctx, p, peer_rounds, mine, order, ep)
    if late is not None:
        out.metrics.update(_late_metrics(ctx, late, out.metrics, p))
    return out


def _rounds(ctx, p: dict, ep, hs: str):
    n = scaled_slice(p, ctx.raw_path("slice.jsonl"))
    cfg = {
        "mode": "bench",
        "base_url": ep.base_url,
        "model": ep.model,
        "tokenizer": p["tokenizer"] or _model_dir(),
        "dataset": str(ctx.raw_path("slice.jsonl")),
        "multiplier": 0.001,
        "num_prompts": n,
        "chunk_tokens": p["chunk_tokens"],
        "seed": 0,
        "result_dir": str(ctx.raw_dir),
        "rounds": p["rounds"],
        "handshake_dir": hs,
        "prompts_out": str(ctx.raw_path("prompts.json")),
        "out": str(ctx.raw_path("vllm_result.json")),
    }
    vllm_first = ctx.repetition % 2 == 1
    order = ["vllm", "harness"] if vllm_first else ["harness", "vllm"]
    peer = Peer(ctx, cfg, p)
    mine: list[client.Result] = []
    try:
        prompts = peer.prompts()
        for k in range(p["rounds"]):
            for who in order:
                if who == "vllm":
                    peer.round(k)
                else:
                    mine += _harness(ep, prompts, f"harness-{k}")
                engines.require(ep)
            ctx.log(f"round {k + 1}/{p['rounds']} ({' then '.join(order)})")
        late = _harness(ep, prompts, "late", p["instrument_delay_ms"]) if p["instrument_delay_ms"] else None
        engines.require(ep)
        return peer.results(), mine, late, order
    finally:
        peer.close()


def _model_dir() -> str:

    return str(smollm2_dir())


def pooled(rounds: list[dict]) -> dict:
    """vLLM's per-request figures of every round, pooled: TTFT and TPOT in ms (TPOT as vLLM
    computes it: (last token - first token) / (output tokens - 1)), prompt lengths, errors."""
    out: dict[str, Any] = {"ttft_ms": [], "tpot_ms": [], "itl_ms": [], "prompt_tokens": [], "failed": 0, "completed": 0}
    for r in rounds:
        errors = r.get("errors") or [""] * len(r.get("ttfts") or [])
        for ttft, itl, n_out, n_in, err in zip(
            r.get("ttfts") or [], r.get("itls") or [], r.get("output_lens") or [], r.get("input_lens") or [], errors
        ):
            if err or not ttft:
                out["failed"] += 1
                continue
            out["completed"] += 1
            out["ttft_ms"].append(1000 * ttft)
            out["itl_ms"] += [1000 * x for x in itl or []]
            out["tpot_ms"].append(1000 * sum(itl) / (n_out - 1) if itl and n_out and n_out > 1 else None)
            out["prompt_tokens"].append(n_in)
    return out


def _peer_metrics(rounds: list[dict]) -> dict[str, Metric]:
    pool = pooled(rounds)
    m = {
        "vllm.ok": Metric(pool["completed"], "requests", "higher"),
        "vllm.failed": Metric(pool["failed"], "requests", "lower"),
    }
    note = f"vLLM's benchmark client, its per-request figures of {len(rounds)} rounds pooled"
    for name, vals, qs in (
        ("ttft", pool["ttft_ms"], (50, 95)),
        ("tpot", [x for x in pool["tpot_ms"] if x], (50, 95)),
        ("itl", pool["itl_ms"], (50,)),
    ):
        for q in qs:
            if vals:
                m[f"vllm.{name}_p{q}_ms"] = Metric(stats.percentile(vals, q), "ms", "lower", note)
    own = [v for r in rounds if (v := r.get("median_ttft_ms")) is not None]
    if own:
        m["vllm.own_round_median_ttft_ms"] = Metric(
            stats.median(own), "ms", "lower", "the median over rounds of vLLM's own reported median TTFT"
        )
    return m


def _outcome(ctx, p, rounds: list[dict], mine: list[client.Result], order: list[str], ep) -> Record:
    m = summary.metrics_of("harness", mine, f"the harness's client, {p['rounds']} rounds pooled")
    m.update(_peer_metrics(rounds))
    summary.write_rows(ctx.raw_path("harness.csv"), mine)
    for what in ("ttft_p50_ms", "tpot_p50_ms", "ttft_p95_ms", "tpot_p95_ms"):
        a, b = m.get(f"harness.{what}"), m.get(f"vllm.{what}")
        # a metric made invalid (the server's usage counts impossible) has no value: no difference
        if a is not None and a.value is not None and b is not None and b.value:
            diff = 100 * (a.value - b.value) / b.value
            key = what.replace("_ms", "")
            m[f"peer.{key}_diff_pct"] = Metric(diff, "%", None, "harness minus vLLM's client, over vLLM's")
            m[f"peer.{key}_absdiff_pct"] = Metric(abs(diff), "%", "lower")
    series = {"harness": summary.series_of(mine, "harness")}
    pool = pooled(rounds)
    if pool["ttft_ms"]:
        series[PEER_REQUESTS.name] = PEER_REQUESTS.make(
            {
                "arm": ["vllm"] * len(pool["ttft_ms"]),
                "ttft_ms": pool["ttft_ms"],
                "tpot_ms": pool["tpot_ms"],
                "prompt_tokens": pool["prompt_tokens"],
            }
        )
    details = {
        "order": order,
        "rounds": p["rounds"],
        "vllm_rounds": [{k: v for k, v in r.items() if not isinstance(v, list)} for r in rounds],
    }
    facts = {
        "peer_client": "vllm.benchmarks.serve",
        "peer_first": order[0] == "vllm",
        "peer_engine_prefix_caching": str(ep.prefix_caching),
        "python_hash_seed": HASH_SEED,
    }
    invented = summary.invalid_usage("harness", mine)
    if invented:  # the server's token counts are impossible: TPOT is no measurement, the case says so
        return Record("invalid", invented, m, details, series, facts)
    return Record("ok", metrics=m, series=series, details=details, facts=facts)


def _late_metrics(ctx, late: list[client.Result], m: dict, p: dict) -> dict[str, Metric]:
    """The instrument: the harness's client made late by a known wait, against vLLM's client."""
    summary.write_rows(ctx.raw_path("harness_late.csv"), late)
    out = {
        k.replace("harness.", "instrument.late.", 1): v
        for k, v in summary.metrics_of("harness", late).items()
        if k.startswith("harness.ttft_") or k in ("harness.ok", "harness.error_pct")
    }
    a, b = out.get("instrument.late.ttft_p50_ms"), m.get("vllm.ttft_p50_ms")
    if a is not None and b is not None and b.value:
        out["instrument.late.ttft_p50_diff_pct"] = Metric(
            100 * (a.value - b.value) / b.value,
            "%",
            None,
            (f"the harness's client with {p['instrument_delay_ms']:g} ms added before every POST, over vLLM's client"),
        )
    return out
