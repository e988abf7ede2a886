"""The engine-hotload drivers: cold start, prewarm, hot swap, refused swap, signed load.

Every driver takes `backend: ort | trt`; a TensorRT case is skipped with the reason where
tensorrt or a GPU is missing.
"""

from __future__ import annotations

import csv
import json
import shutil
import tempfile
import time
from functools import lru_cache
from pathlib import Path

from harness import stats
from harness.drivers import CaseContext, CaseOutcome, Metric, Param, register
from harness.errors import BadInput
from harness.paths import REPO_ROOT

DEFAULT_BUCKETS = [[1, 16], [1, 64], [8, 16], [8, 64]]
# TensorRT profiles, each [[min_batch, min_seq], [opt_batch, opt_seq], [max_batch, max_seq]]:
# short sequences, long sequences. Every default bucket is covered by at least one.
DEFAULT_TRT_PROFILES = [[[1, 1], [4, 16], [8, 32]], [[1, 1], [4, 64], [8, 128]]]
MIB = 2**20

COMMON = {
    "backend": Param(str, "ort", "ort (ONNX Runtime on the CPU) or trt (TensorRT on a GPU)", ("ort", "trt")),
    "model": Param((str, type(None)), None, "ONNX file to serve; default: all-MiniLM-L6-v2, exported once"),
    "buckets": Param(list, DEFAULT_BUCKETS, "shape buckets the service sends, as [batch, sequence]"),
    "texts": Param(str, "data/gptcache_mock_data.json", "JSON list of texts or {similar: ...} records"),
    "intra_op_threads": Param(int, 1, "ONNX Runtime intra-op threads per session (0 = all cores)"),
    "opt_level": Param(str, "all", "ONNX Runtime graph optimization level", ("disabled", "basic", "extended", "all")),
    "trt_profiles": Param(list, DEFAULT_TRT_PROFILES,
                          "TensorRT optimization profiles: [[min_b, min_s], [opt_b, opt_s], [max_b, max_s]] each"),
}


def _check_common(where: str, p: dict) -> None:
    from harness.experiments.engine_hotload.lifecycle import parse_buckets

    try:
        parse_buckets(p["buckets"])
    except ValueError as e:
        raise BadInput(f"{where}.buckets: {e}") from None
    if p["intra_op_threads"] < 0:
        raise BadInput(f"{where}.intra_op_threads: must be >= 0")
    for i, prof in enumerate(p["trt_profiles"]):
        ok = (isinstance(prof, list) and len(prof) == 3
              and all(isinstance(x, list) and len(x) == 2 and all(isinstance(v, int) and v >= 1 for v in x) for x in prof))
        if not ok:
            raise BadInput(f"{where}.trt_profiles[{i}]: expected [[min_b, min_s], [opt_b, opt_s], [max_b, max_s]]")
        if not all(prof[0][k] <= prof[1][k] <= prof[2][k] for k in (0, 1)):
            raise BadInput(f"{where}.trt_profiles[{i}]: needs min <= opt <= max in each dimension")
    for k in ("cold_starts", "steady_requests", "threads", "swaps"):
        if k in p and p[k] < 1:
            raise BadInput(f"{where}.{k}: must be at least 1, got {p[k]}")


def _path(p: str) -> Path:
    q = Path(p).expanduser()
    return q if q.is_absolute() or q.exists() else REPO_ROOT / q


@lru_cache(maxsize=4)
def _feeds(texts_path: str):
    from harness.experiments.engine_hotload.workload import TextFeeds, load_texts

    return TextFeeds(load_texts(_path(texts_path)))


class _Served:
    """What a case serves: the engine file, its manifest verifier, and how to open it."""

    def __init__(self, ctx: CaseContext):
        from harness.experiments.engine_hotload.export import engine_cache_dir, minilm_onnx
        from harness.experiments.engine_hotload.lifecycle import parse_buckets

        p = ctx.params
        self.params, self.backend = p, p["backend"]
        self.buckets = parse_buckets(p["buckets"])
        if p["model"]:
            onnx = _path(p["model"])
            if not onnx.exists():
                raise BadInput(f"model {p['model']} does not exist; give an ONNX file or leave model empty")
        else:
            onnx = minilm_onnx(log=ctx.log)
        self.onnx = onnx
        if self.backend == "trt":
            from harness.experiments.engine_hotload.backend_trt import cached_plan

            self.file = cached_plan(onnx, p["trt_profiles"], engine_cache_dir(), log=ctx.log)
        else:
            self.file = onnx
        self.verifier = trusted_manifest(self.file)
        self.feeds = _feeds(p["texts"])

    def options(self) -> dict:
        if self.backend == "ort":
            return {"intra_op_threads": self.params["intra_op_threads"], "opt_level": self.params["opt_level"]}
        return {}

    def open(self, path: Path | None = None, label: str = "", verifier=None):
        from harness.experiments.engine_hotload.lifecycle import open_engine

        path = path or self.file
        return open_engine(self.backend, path, verifier=verifier or self.verifier, label=label or path.name,
                           **self.options())


def trusted_manifest(file: Path):
    """The SHA-256 manifest kept next to a cached engine file (written when the file was made
    or first seen), as a Verifier; every load checks the file against it."""
    from harness.experiments.engine_hotload.signing import Verifier, write_manifest

    man = file.with_name(file.name + ".manifest.json")
    if not man.exists():
        write_manifest([file], man)
    return Verifier(man)


def _skip_reason(ctx: CaseContext) -> str | None:
    if ctx.params["backend"] != "trt":
        return None
    from harness.experiments.engine_hotload.backend_trt import unavailable_reason

    why = unavailable_reason()
    return f"TensorRT case skipped: {why}" if why else None


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def _env_details(served: _Served, engine) -> dict:
    out = {"backend": served.backend, "engine_file": served.file.name, "engine_bytes": engine.size_bytes,
           "io": [t.to_json() for t in engine.io()], "profiles": [p.to_json() for p in engine.profiles()],
           "memory": engine.memory()}
    if served.backend == "trt":
        from harness.experiments.engine_hotload.backend_trt import environment

        out["tensorrt_environment"] = environment()
    else:
        import onnxruntime

        out["onnxruntime"] = onnxruntime.__version__
    return out


# ---- cold start ----------------------------------------------------------------------------

@register("engine-hotload-cold-start", params={**COMMON, "cold_starts": Param(int, 5, "fresh loads per repetition")},
          check=_check_common,
          description="From nothing to the first result: read, verify, deserialize/session, contexts, first inference")
def cold_start(ctx: CaseContext) -> CaseOutcome:
    if (why := _skip_reason(ctx)):
        return CaseOutcome("skipped", why)
    from harness.experiments.engine_hotload.lifecycle import open_engine

    served = _Served(ctx)
    b0 = served.buckets[0]
    rows, env = [], {}
    for i in range(ctx.params["cold_starts"]):
        t0 = time.perf_counter()
        eng = open_engine(served.backend, served.file, verifier=served.verifier, label=f"cold{i}", **served.options())
        feeds = served.feeds.feeds(eng.io(), b0)
        t1 = time.perf_counter()
        eng.infer(feeds)
        first = (time.perf_counter() - t1) * 1e3
        total = (time.perf_counter() - t0) * 1e3
        tm = eng.timings
        rows.append([i + 1, tm["read_ms"], tm["verify_ms"], tm["deserialize_ms"], tm["context_ms"], first, total])
        if not env:
            env = _env_details(served, eng)
        eng.close()
        ctx.log(f"cold start {i + 1}: {total:.0f} ms (deserialize {tm['deserialize_ms']:.0f} ms, first inference {first:.1f} ms)")
    cols = ["cold start", "read_ms", "verify_ms", "deserialize_ms", "context_ms", "first_infer_ms", "total_ms"]
    _write_csv(ctx.raw_path("cold_starts.csv"), cols, rows)
    med = {c: stats.median([r[k] for r in rows]) for k, c in enumerate(cols) if k > 0}
    m = {c: Metric(v, "ms", "lower") for c, v in med.items()}
    m["engine_mib"] = Metric(env["engine_bytes"] / MIB, "MiB")
    note = ("ONNX Runtime has no execution context: context_ms is making the RunOptions; "
            "deserialize_ms is InferenceSession creation from the verified bytes. The file is read from "
            "the page cache after the first load.") if served.backend == "ort" else \
        "TensorRT: deserialize_cuda_engine, then one execution context per optimization profile."
    return CaseOutcome("ok", metrics=m, details={
        **env, "tables": [{"title": f"Cold start split (first inference on bucket {b0.name})", "columns": cols,
                           "rows": rows, "note": note}],
        "charts": [{"title": "Cold start split (median of fresh loads)", "x_label": "phase", "y_label": "ms",
                    "kind": "bar", "series": [{"name": "median", "points": [[c.removesuffix("_ms"), med[c]]
                                                                           for c in cols[1:-1]]}]}]})


# ---- prewarm ---------------------------------------------------------------------------------

PREWARM_PARAMS = {**COMMON,
                  "cold_starts": Param(int, 5, "fresh engines per mode (prewarmed / not); the first request of "
                                                "each bucket is taken on each, the median kept"),
                  "steady_requests": Param(int, 60, "steady-state requests per bucket (interleaved over buckets)")}


def first_requests(engine, buckets, feeds) -> dict[str, float]:
    """Latency (ms) of the first request of each bucket, in bucket order."""
    out = {}
    for b in buckets:
        f = feeds.feeds(engine.io(), b, 1)
        t = time.perf_counter()
        engine.infer(f)
        out[b.name] = (time.perf_counter() - t) * 1e3
    return out


def steady_state(engine, buckets, feeds, n: int) -> dict[str, list[float]]:
    out = {b.name: [] for b in buckets}
    for i in range(n):
        for b in buckets:
            f = feeds.feeds(engine.io(), b, i + 2)
            t = time.perf_counter()
            engine.infer(f)
            out[b.name].append((time.perf_counter() - t) * 1e3)
    return out


@register("engine-hotload-prewarm", params=PREWARM_PARAMS, check=_check_common,
          description="First request per shape bucket with and without prewarm, against steady-state p50/p99")
def prewarm(ctx: CaseContext) -> CaseOutcome:
    if (why := _skip_reason(ctx)):
        return CaseOutcome("skipped", why)
    served = _Served(ctx)
    p, buckets = ctx.params, served.buckets
    firsts: dict[str, dict[str, list]] = {"prewarmed": {b.name: [] for b in buckets},
                                          "cold": {b.name: [] for b in buckets}}
    prewarm_runs, prewarm_ms, env, steady, raw, plan = [], [], {}, {b.name: [] for b in buckets}, [], []
    for i in range(p["cold_starts"]):
        for mode in ("prewarmed", "cold"):
            eng = served.open(label=f"{mode}{i}")
            if mode == "prewarmed":
                recs = eng.prewarm(buckets, served.feeds.feeds_for(eng.io(), 0))
                plan = [{"profile": r.profile, "bucket": r.bucket} for r in recs]
                prewarm_runs.append(len(recs))
                prewarm_ms.append(sum(r.ms for r in recs))
                raw += [[i + 1, "prewarm", r.bucket, r.profile, r.ms] for r in recs]
            for name, ms in first_requests(eng, buckets, served.feeds).items():
                firsts[mode][name].append(ms)
                raw.append([i + 1, f"{mode}-first", name, "", ms])
            if mode == "prewarmed":  # steady state on every prewarmed engine, pooled
                for name, lat in steady_state(eng, buckets, served.feeds,
                                              max(1, p["steady_requests"] // p["cold_starts"])).items():
                    steady[name] += lat
                    raw += [[i + 1, "steady", name, "", v] for v in lat]
            if not env:
                env = _env_details(served, eng)
            eng.close()
        ctx.log(f"engine {i + 1}/{p['cold_starts']}: prewarmed and cold first requests taken")
    _write_csv(ctx.raw_path("prewarm_requests.csv"), ["engine", "kind", "bucket", "profile", "ms"], raw)
    metrics, rows = {}, []
    worst = {"prewarmed": 0.0, "cold": 0.0}
    worst99 = 0.0
    for b in buckets:
        s = steady[b.name]
        p50, p99 = stats.percentile(s, 50), stats.percentile(s, 99)
        fp, fc = stats.median(firsts["prewarmed"][b.name]), stats.median(firsts["cold"][b.name])
        metrics[f"{b.name}.p50_ms"] = Metric(p50, "ms", "lower")
        metrics[f"{b.name}.p99_ms"] = Metric(p99, "ms", "lower")
        metrics[f"{b.name}.prewarmed_first_ms"] = Metric(fp, "ms", "lower")
        metrics[f"{b.name}.cold_first_ms"] = Metric(fc, "ms", "lower")
        metrics[f"{b.name}.prewarmed.first_over_p50"] = Metric(fp / p50, "x", "lower")
        metrics[f"{b.name}.cold.first_over_p50"] = Metric(fc / p50, "x", "lower")
        worst["prewarmed"] = max(worst["prewarmed"], fp / p50)
        worst["cold"] = max(worst["cold"], fc / p50)
        worst99 = max(worst99, fp / p99)
        rows.append([b.name, len(s), p50, p99, fp, fp / p50, fc, fc / p50])
    metrics["prewarmed.first_over_p50"] = Metric(worst["prewarmed"], "x", "lower",
                                                 "worst bucket: median first request after prewarm / steady p50")
    metrics["cold.first_over_p50"] = Metric(worst["cold"], "x", "lower",
                                            "worst bucket: median first request without prewarm / steady p50")
    metrics["prewarmed.first_over_p99"] = Metric(worst99, "x", "lower", "worst bucket: first after prewarm / steady p99")
    metrics["prewarm_ms"] = Metric(stats.median(prewarm_ms), "ms", "lower")
    metrics["prewarm_runs"] = Metric(stats.median(prewarm_runs), "inferences", None,
                                     "one per (optimization profile, bucket it covers)")
    cols = ["bucket", "steady n", "steady p50 ms", "steady p99 ms", "first after prewarm ms", "x p50",
            "first without prewarm ms", "x p50"]
    chart_series = [{"name": n, "points": [[r[0], r[k]] for r in rows]}
                    for n, k in (("first without prewarm", 6), ("first after prewarm", 4),
                                 ("steady p50", 2), ("steady p99", 3))]
    return CaseOutcome("ok", metrics=metrics, details={
        **env, "prewarm_plan": plan,
        "tables": [{"title": "Claimed vs measured (this repetition)", "columns": ["what", "source", "measured"],
                    "rows": [["first request after prewarm / steady p50 (worst bucket)", "no penalty (~1.0x)",
                              f"{worst['prewarmed']:.2f}x"],
                             ["first request without prewarm / steady p50 (worst bucket)", "a penalty",
                              f"{worst['cold']:.2f}x"],
                             ["first request after prewarm / steady p99 (worst bucket)", "no penalty (<= 1.0x)",
                              f"{worst99:.2f}x"]],
                    "note": "The source prewarms optimization profile 0 only; here every profile and bucket is "
                            "prewarmed."},
                   {"title": "First request per shape bucket, with and without prewarm", "columns": cols,
                    "rows": rows,
                    "note": f"Each first-request figure is the median over {p['cold_starts']} fresh engines; the "
                            "first request of each bucket is taken in bucket order right after load (and prewarm). "
                            "Steady state: interleaved requests over all buckets on the prewarmed engines."}],
        "charts": [{"title": "First request vs steady state per bucket", "x_label": "bucket", "y_label": "ms",
                    "kind": "bar", "series": chart_series}]})


# ---- hot swap under load -----------------------------------------------------------------------

SWAP_PARAMS = {**COMMON,
               "threads": Param(int, 4, "request threads"),
               "interval_ms": Param(float, 10.0, "each thread sends one request per interval (0 = back to back)"),
               "swaps": Param(int, 3, "hot swaps during the stream"),
               "before_s": Param(float, 2.0, "steady stream before the first swap"),
               "gap_s": Param(float, 3.0, "time between swap starts"),
               "after_s": Param(float, 2.0, "stream after the last swap finished"),
               "sample_ms": Param(float, 10.0, "memory sampling interval"),
               "window_ms": Param(float, 250.0, "window of the latency-over-time chart")}


def _second_version(served: _Served) -> Path:
    """The engine file the swap alternates with: for ONNX Runtime, its optimized graph of
    the same model saved once (another file, same IO); for TensorRT, the same plan."""
    if served.backend != "ort":
        return served.file
    from harness.experiments.engine_hotload.backend_ort import save_optimized

    dst = served.file.with_name(served.file.stem + "-ortopt.onnx")
    return save_optimized(served.file, dst, "extended")


def _run_stream(ctx: CaseContext, served: _Served, slot, p: dict, t0: float, actions):
    """Run the request stream around `actions(stream)`; returns the stream's records."""
    from harness.experiments.engine_hotload.workload import RequestStream

    feeds = served.feeds

    def call(bucket, i):
        _, version = slot.infer(feeds.feeds(slot.engine.io(), bucket, i))
        return version

    stream = RequestStream(call, served.buckets, p["threads"], p["interval_ms"], t0).start()
    try:
        actions(stream)
    finally:
        records = stream.stop()
    return records


@register("engine-hotload-hot-swap", params=SWAP_PARAMS, check=_check_common,
          description="Hot swaps under a steady multi-threaded request stream: failures, switch time, memory peak")
def hot_swap(ctx: CaseContext) -> CaseOutcome:
    if (why := _skip_reason(ctx)):
        return CaseOutcome("skipped", why)
    from harness.experiments.engine_hotload.gpu import MemorySampler, peak_extra
    from harness.experiments.engine_hotload.swap import EngineSlot
    from harness.experiments.engine_hotload.workload import summary, windows

    p = ctx.params
    served = _Served(ctx)
    files = [served.file, _second_version(served)]
    verifiers = [served.verifier, trusted_manifest(files[1])]
    sampler = MemorySampler(interval_s=p["sample_ms"] / 1e3).start()
    t0 = sampler.t0
    first = served.open(files[0], label=f"v0 {files[0].name}")
    first.prewarm(served.buckets, served.feeds.feeds_for(first.io(), 0))
    env = _env_details(served, first)
    slot = EngineSlot(first)
    reports, errors = [], []

    def actions(stream):
        time.sleep(p["before_s"])
        for k in range(p["swaps"]):
            start = time.perf_counter()
            idx = (k + 1) % 2
            try:
                rep = slot.swap(lambda: served.open(files[idx], label=f"v{k + 1} {files[idx].name}",
                                                     verifier=verifiers[idx]),
                                served.buckets, lambda b: served.feeds.feeds(slot.engine.io(), b, 0))
                reports.append(rep)
                ctx.log(f"swap {k + 1}: serving {files[idx].name} after {rep.durations_ms()['to_serving_ms']:.0f} ms; "
                        f"switch held the lock {rep.switch_s * 1e6:.0f} us")
            except Exception as e:
                errors.append(f"swap {k + 1}: {type(e).__name__}: {e}")
            if k < p["swaps"] - 1:
                time.sleep(max(0.0, p["gap_s"] - (time.perf_counter() - start)))
        time.sleep(p["after_s"])

    try:
        records = _run_stream(ctx, served, slot, p, t0, actions)
    finally:
        samples = sampler.stop()
        slot.engine.close()
    if errors:
        return CaseOutcome("failed", "; ".join(errors))
    # raw outputs
    _write_csv(ctx.raw_path("requests.csv"), ["t_s", "latency_ms", "ok", "thread", "bucket", "version", "error"],
               [[f"{r.t:.6f}", f"{r.ms:.4f}", int(r.ok), r.thread, r.bucket, r.version, r.error] for r in records])
    _write_csv(ctx.raw_path("memory.csv"), ["t_s", "rss_bytes", "gpu_used_bytes", "gpu_util_pct"],
               [[f"{s.t:.4f}", s.rss_bytes, s.gpu_used_bytes, s.gpu_util_pct] for s in samples])
    swaps = []
    for rep in reports:
        d = rep.durations_ms()
        w = (rep.started - t0, rep.released - t0)
        base, extra = peak_extra(samples, w[0], w[1])
        gpu_extra = None
        if sampler.gpu.get("present"):
            _, gpu_extra = peak_extra(samples, w[0], w[1], "gpu_used_bytes")
        swaps.append({**d, "t_start_s": w[0], "t_switch_s": rep.switched - t0, "t_released_s": w[1],
                      "inflight_at_switch": rep.inflight_at_switch, "old": rep.old_label, "new": rep.new_label,
                      "rss_baseline_mib": base / MIB, "rss_peak_extra_mib": extra / MIB,
                      "gpu_peak_extra_mib": None if gpu_extra is None else gpu_extra / MIB})
    (ctx.raw_path("swaps.json")).write_text(json.dumps(swaps, indent=2))
    failed = [r for r in records if not r.ok]
    in_swap = lambda r: any(s["t_start_s"] <= r.t <= s["t_released_s"] for s in swaps)  # noqa: E731
    steady = summary([r.ms for r in records if r.ok and not in_swap(r)])
    during = summary([r.ms for r in records if r.ok and in_swap(r)])
    engine_mib = first.size_bytes / MIB
    worst_extra = max(s["rss_peak_extra_mib"] for s in swaps)
    m = {
        "failed_requests": Metric(len(failed), "requests", "lower"),
        "requests": Metric(len(records), "requests", "higher"),
        "swaps_done": Metric(len(swaps), "swaps", "higher"),
        "swap.to_serving_ms": Metric(stats.median([s["to_serving_ms"] for s in swaps]), "ms", "lower",
                                     "load aside + check + prewarm + switch (median over swaps)"),
        "swap.switch_ms": Metric(max(s["switch_ms"] for s in swaps), "ms", "lower",
                                 "longest time the reference lock was held to switch"),
        "swap.drain_ms": Metric(stats.median([s["drain_ms"] for s in swaps]), "ms", "lower",
                                "wait for calls in flight on the old engine"),
        "steady.p50_ms": Metric(steady["p50"], "ms", "lower"),
        "steady.p99_ms": Metric(steady["p99"], "ms", "lower"),
        "during_swap.p50_ms": Metric(during["p50"], "ms", "lower") if during["n"] else Metric(None, "ms"),
        "during_swap.p99_ms": Metric(during["p99"], "ms", "lower") if during["n"] else Metric(None, "ms"),
        "engine_mib": Metric(engine_mib, "MiB"),
        "rss_peak_extra_mib": Metric(worst_extra, "MiB", "lower", "largest RSS rise over the pre-swap baseline"),
        "rss_peak_extra_over_engine": Metric(worst_extra / engine_mib, "x", "lower",
                                             "RSS peak extra during a swap / engine file size (the 2x rule: 1.0)"),
    }
    if sampler.gpu.get("present"):
        g = max(s["gpu_peak_extra_mib"] for s in swaps)
        m["gpu_peak_extra_mib"] = Metric(g, "MiB", "lower")
        m["gpu_peak_extra_over_engine"] = Metric(g / engine_mib, "x", "lower")
    m = {k: v for k, v in m.items() if v.value is not None}
    win = windows(records, p["window_ms"] / 1e3)
    ymax = max((w["max"] for w in win), default=1.0)
    series = [{"name": f"p50 per {p['window_ms']:g} ms", "points": [[w["t"], w["p50"]] for w in win]},
              {"name": f"max per {p['window_ms']:g} ms", "points": [[w["t"], w["max"]] for w in win]}]
    for k, s in enumerate(swaps):
        series.append({"name": f"swap {k + 1} (start..switch)",
                       "points": [[s["t_start_s"], ymax], [s["t_switch_s"], ymax], [s["t_switch_s"], 0.0]]})
    rss = [[s.t, s.rss_bytes / MIB] for s in samples[:: max(1, len(samples) // 400)]]
    mem_series = [{"name": "process RSS MiB", "points": rss}]
    if sampler.gpu.get("present"):
        mem_series.append({"name": "GPU used MiB", "points": [[s.t, (s.gpu_used_bytes or 0) / MIB]
                                                              for s in samples[:: max(1, len(samples) // 400)]]})
    for k, s in enumerate(swaps):
        mem_series.append({"name": f"swap {k + 1}", "points": [[s["t_start_s"], rss[0][1]], [s["t_released_s"], rss[0][1]]]})
    cols = ["swap", "old", "new", "load ms", "check ms", "prewarm ms", "switch ms", "drain ms", "to serving ms",
            "in flight at switch", "RSS extra MiB", "extra / engine"]
    rows = [[k + 1, s["old"], s["new"], s["load_ms"], s["check_ms"], s["prewarm_ms"], s["switch_ms"], s["drain_ms"],
             s["to_serving_ms"], s["inflight_at_switch"], s["rss_peak_extra_mib"], s["rss_peak_extra_mib"] / engine_mib]
            for k, s in enumerate(swaps)]
    mem_what = "GPU memory (NVML)" if sampler.gpu.get("present") else "process RSS (no GPU here)"
    mem_ratio = m["gpu_peak_extra_over_engine"].value if "gpu_peak_extra_over_engine" in m else worst_extra / engine_mib
    claimed = [["failed requests during a swap", "0 (swap at run time without restarting)", len(failed)],
               ["time the reference switch blocks requests", "not stated", f"{m['swap.switch_ms'].value:.3f} ms"],
               ["swap, start to serving the new engine", "not stated", f"{m['swap.to_serving_ms'].value:.0f} ms"],
               [f"memory peak during a swap, {mem_what}", ">= 2x engine size in total, i.e. extra = 1.0x",
                f"extra = {mem_ratio:.2f}x the engine file ({worst_extra:.0f} MiB RSS extra, "
                f"engine {engine_mib:.1f} MiB)"]]
    return CaseOutcome("ok", metrics=m, details={
        **env, "gpu_telemetry": sampler.gpu, "failures": [r.error for r in failed][:20], "swaps": swaps,
        "latency": {"steady": steady, "during_swap": during},
        "tables": [{"title": "Claimed vs measured (this repetition)", "columns": ["what", "source", "measured"],
                    "rows": claimed,
                    "note": "RSS extra counts the verified file bytes held until the session is built, the "
                            "session's own copy of the weights and its arenas after prewarm; on a GPU the NVML "
                            "figure counts old + new weights, both engines' context memory and IO buffers."},
                   {"title": "Hot swaps under load", "columns": cols, "rows": rows,
                    "note": f"{p['threads']} threads, one request per {p['interval_ms']:g} ms each, buckets "
                            f"{', '.join(b.name for b in served.buckets)}. Memory: process RSS sampled every "
                            f"{p['sample_ms']:g} ms (GPU memory through NVML when present: "
                            f"{sampler.gpu.get('reason') or 'present'}). Engine size = the file's size."}],
        "charts": [{"title": "Request latency over time around the swaps", "x_label": "time (s)",
                    "y_label": "latency (ms)", "kind": "line", "series": series},
                   {"title": "Process memory around the swaps", "x_label": "time (s)", "y_label": "MiB",
                    "kind": "line", "series": mem_series}]})


# ---- a swap that must be refused ---------------------------------------------------------------

def incompatible_variants(folder: Path) -> list[tuple[str, Path, bool]]:
    """(what differs, ONNX file, should be refused) for the refused-swap case."""
    from harness.experiments.engine_hotload.export import tiny_onnx

    dyn = ("batch", "sequence")
    return [
        ("same IO as MiniLM (control: must be accepted)", tiny_onnx(folder / "same-io.onnx"), False),
        ("input 'token_type_ids' instead of 'attention_mask'",
         tiny_onnx(folder / "other-input.onnx", inputs=(("input_ids", "int64", dyn), ("token_type_ids", "int64", dyn))),
         True),
        ("'attention_mask' is int32, not int64",
         tiny_onnx(folder / "int32-mask.onnx", inputs=(("input_ids", "int64", dyn), ("attention_mask", "int32", dyn))),
         True),
        ("sequence fixed at 16: served buckets with longer sequences fall outside",
         tiny_onnx(folder / "seq16.onnx", inputs=(("input_ids", "int64", ("batch", 16)),
                                                  ("attention_mask", "int64", ("batch", 16)))), True),
        ("output 'sentence_embedding' has 256 values, not 384",
         tiny_onnx(folder / "out256.onnx", output=("sentence_embedding", "float32", ("batch", 256))), True),
    ]


@register("engine-hotload-incompatible-swap", params={**COMMON, "threads": Param(int, 2, "request threads during the attempts"),
                                              "interval_ms": Param(float, 10.0, "per-thread request interval")},
          check=_check_common,
          description="Swaps to models with other IO tensors are refused, naming the tensor; the old engine serves on")
def incompatible_swap(ctx: CaseContext) -> CaseOutcome:
    if (why := _skip_reason(ctx)):
        return CaseOutcome("skipped", why)
    from harness.experiments.engine_hotload.signing import Verifier, write_manifest
    from harness.experiments.engine_hotload.swap import EngineSlot, IncompatibleEngine

    p = ctx.params
    served = _Served(ctx)
    folder = ctx.raw_dir / "variants"
    folder.mkdir(parents=True, exist_ok=True)
    variants = incompatible_variants(folder)
    if served.backend == "trt":
        from harness.experiments.engine_hotload.backend_trt import cached_plan
        from harness.experiments.engine_hotload.export import engine_cache_dir

        variants = [(w, cached_plan(f, p["trt_profiles"] if "seq16" not in f.name else [[[1, 16], [4, 16], [8, 16]]],
                                    engine_cache_dir(), log=ctx.log), r) for w, f, r in variants]
    verifier = Verifier(write_manifest([f for _, f, _ in variants], folder / "manifest.json"))
    first = served.open(label="minilm")
    first.prewarm(served.buckets, served.feeds.feeds_for(first.io(), 0))
    slot = EngineSlot(first)
    results = []

    def actions(stream):
        time.sleep(0.3)
        for what, f, should_refuse in variants:
            version_before = slot.version
            try:
                slot.swap(lambda: served.open(f, label=f.name, verifier=verifier), served.buckets,
                          lambda b: served.feeds.feeds(slot.engine.io(), b, 0))
                outcome, msg = "accepted", f"now serving {f.name}"
                slot.swap(lambda: served.open(label="minilm"), served.buckets,  # back to the real model
                          lambda b: served.feeds.feeds(slot.engine.io(), b, 0))
            except IncompatibleEngine as e:
                outcome, msg = "refused", str(e)
            results.append({"variant": what, "file": f.name, "expected": "refused" if should_refuse else "accepted",
                            "outcome": outcome, "message": msg, "version_before": version_before,
                            "version_after": slot.version})
            ctx.log(f"{what}: {outcome}")
            time.sleep(0.2)

    t0 = time.perf_counter()
    try:
        records = _run_stream(ctx, served, slot, p, t0, actions)
    finally:
        slot.engine.close()
    (ctx.raw_path("attempts.json")).write_text(json.dumps(results, indent=2))
    refused_ok = sum(r["outcome"] == "refused" and r["expected"] == "refused" for r in results)
    wrong = sum(r["outcome"] != r["expected"] for r in results)
    failed = sum(not r.ok for r in records)
    m = {"refused": Metric(refused_ok, "swaps", "higher"),
         "expected_refusals": Metric(sum(r["expected"] == "refused" for r in results), "swaps"),
         "wrong_verdicts": Metric(wrong, "swaps", "lower"),
         "failed_requests": Metric(failed, "requests", "lower"),
         "requests": Metric(len(records), "requests")}
    return CaseOutcome("ok", metrics=m, details={
        "attempts": results, "failures": [r.error for r in records if not r.ok][:20],
        "tables": [{"title": "Swap attempts to models with other IO tensors", "columns":
                    ["variant", "expected", "outcome", "message"],
                    "rows": [[r["variant"], r["expected"], r["outcome"], r["message"]] for r in results],
                    "note": "Small ONNX models built with onnx.helper next to the served MiniLM; the check runs "
                            "after loading aside and before any prewarm or switch, under a request stream."}]})


# ---- signed load ---------------------------------------------------------------------------

class _CountingOrt:
    """Wraps OrtEngine to count how many times a file reached the deserializer."""

    count = 0

    @classmethod
    def make(cls):
        from harness.experiments.engine_hotload.backend_ort import OrtEngine

        class Counting(OrtEngine):
            def _deserialize(self, data, path):
                cls.count += 1
                super()._deserialize(data, path)

        return Counting()


@register("engine-hotload-signed-load", params={**COMMON}, check=_check_common,
          description="SHA-256 manifest with an Ed25519 signature: verified load, and refused tampered, unknown and "
                      "unsigned files before deserialization")
def signed_load(ctx: CaseContext) -> CaseOutcome:
    if ctx.params["backend"] != "ort":
        return CaseOutcome("skipped", "the signature check is backend-independent (it runs on the file's bytes "
                                      "before deserialization); it is measured with backend ort")
    from harness.experiments.engine_hotload.export import tiny_onnx
    from harness.experiments.engine_hotload.signing import (
        ModelRefused,
        Verifier,
        generate_keypair,
        sign_manifest,
        write_manifest,
    )

    served = _Served(ctx)
    work = ctx.raw_dir / "signing"
    (work / "tampered").mkdir(parents=True, exist_ok=True)
    tiny = tiny_onnx(work / "tiny.onnx")
    manifest = write_manifest([served.file, tiny], work / "manifest.json")
    with tempfile.TemporaryDirectory() as keys:  # private keys never reach the results folder
        kdir = Path(keys)
        generate_keypair(kdir / "signer.pem", work / "signer.pub.pem")
        generate_keypair(kdir / "other.pem", work / "other.pub.pem")
        sign_manifest(manifest, kdir / "signer.pem")
        unsigned = work / "unsigned" / "manifest.json"
        unsigned.parent.mkdir(exist_ok=True)
        shutil.copy(manifest, unsigned)
        edited = work / "edited" / "manifest.json"
        edited.parent.mkdir(exist_ok=True)
        doc = json.loads(manifest.read_text())
    tampered = work / "tampered" / "tiny.onnx"
    data = bytearray(tiny.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit flipped
    tampered.write_bytes(bytes(data))
    from harness.experiments.engine_hotload.signing import sha256_bytes

    doc["files"]["tiny.onnx"]["sha256"] = sha256_bytes(bytes(data))  # an attacker edits the manifest too
    edited.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    shutil.copy(manifest.with_name("manifest.json.sig"), edited.with_name("manifest.json.sig"))
    unknown = work / "unknown.onnx"
    shutil.copy(tiny, unknown)
    pub, other = work / "signer.pub.pem", work / "other.pub.pem"

    attempts = []

    def attempt(what: str, expect: str, make_verifier, path: Path):
        before = _CountingOrt.count
        eng = _CountingOrt.make()
        try:
            v = make_verifier()
            eng.load(path, v)
            outcome, msg = "loaded", f"loaded {path.name}"
        except ModelRefused as e:
            outcome, msg = "refused", str(e)
        finally:
            eng.close()
        attempts.append({"case": what, "expected": expect, "outcome": outcome, "message": msg,
                         "deserialized": _CountingOrt.count - before, "timings": dict(eng.timings)})
        ctx.log(f"{what}: {outcome}")

    attempt("signed manifest, MiniLM file intact", "loaded", lambda: Verifier(manifest, pub), served.file)
    attempt("signed manifest, tiny model intact", "loaded", lambda: Verifier(manifest, pub), tiny)
    attempt("one bit flipped in the file", "refused", lambda: Verifier(manifest, pub), tampered)
    attempt("file not listed in the manifest", "refused", lambda: Verifier(manifest, pub), unknown)
    attempt("manifest without signature, key given", "refused", lambda: Verifier(unsigned, pub), tiny)
    attempt("manifest signed by another key", "refused", lambda: Verifier(manifest, other), tiny)
    attempt("manifest edited to match the tampered file", "refused", lambda: Verifier(edited, pub), tampered)
    # run-time re-verification: the file changes on disk after a verified load
    v = Verifier(manifest, pub)
    runtime_copy = work / "runtime" / "tiny.onnx"
    runtime_copy.parent.mkdir(exist_ok=True)
    shutil.copy(tiny, runtime_copy)
    ok_before = v.recheck(runtime_copy)
    runtime_copy.write_bytes(tampered.read_bytes())
    detects = ok_before and not v.recheck(runtime_copy)
    t = time.perf_counter()
    v.recheck(served.file)
    recheck_ms = (time.perf_counter() - t) * 1e3
    (ctx.raw_path("attempts.json")).write_text(json.dumps(attempts, indent=2))
    big = attempts[0]["timings"]
    refusals = [a for a in attempts if a["expected"] == "refused"]
    m = {"refused": Metric(sum(a["outcome"] == "refused" for a in refusals), "files", "higher"),
         "refusal_cases": Metric(len(refusals), "files"),
         "wrong_verdicts": Metric(sum(a["outcome"] != a["expected"] for a in attempts), "files", "lower"),
         "deserialized_refused": Metric(sum(a["deserialized"] for a in refusals), "files", "lower",
                                        "refused files that reached the deserializer (must be 0)"),
         "verify_ms": Metric(big.get("verify_ms", 0.0), "ms", "lower", "SHA-256 of the MiniLM ONNX file (~91 MB)"),
         "verify_over_deserialize": Metric(big.get("verify_ms", 0.0) / max(big.get("deserialize_ms", 1e-9), 1e-9),
                                           "x", "lower"),
         "runtime_recheck_ms": Metric(recheck_ms, "ms", "lower"),
         "runtime_recheck_detects_change": Metric(1.0 if detects else 0.0, "bool", "higher")}
    return CaseOutcome("ok", metrics=m, details={
        "attempts": attempts,
        "tables": [{"title": "Verified loads and refusals", "columns": ["case", "expected", "outcome",
                                                                        "reached deserializer", "message"],
                    "rows": [[a["case"], a["expected"], a["outcome"], a["deserialized"], a["message"]] for a in attempts],
                    "note": "Ed25519 keys made for the run (private keys in a temporary folder, deleted); public keys, "
                            "manifests and signatures are kept in raw/. The check hashes the bytes that were read, and "
                            "those bytes are what ONNX Runtime receives."}]})
