"""The incompatible-swap case: swaps to models whose IO differs from the served model's (and one
with the same IO) under a request stream, each with the compatibility check on and then off
(the control); probes through the slot tell which model serves after each attempt."""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness.experiments.engine_hotload.backend_trt import cached_plan
from harness.experiments.engine_hotload.fingerprint import UNKNOWN, Fingerprints
from harness.experiments.engine_hotload.series import SWAP_ATTEMPTS
from harness.experiments.engine_hotload.served import Served, skip_reason
from harness.experiments.engine_hotload.signing import Verifier, write_manifest
from harness.experiments.engine_hotload.swap import EngineSlot, IncompatibleEngine
from harness.experiments.engine_hotload.swap_stream import reported_facts, run_stream
from harness.mechanisms.onnx_models.export import engine_cache_dir, tiny_onnx
from harness.model.driver_contract import CaseContext, Metric, Record


def incompatible_variants(folder: Path) -> list[tuple[str, Path, bool]]:
    """(what differs, ONNX file, should be refused) for the refused-swap case."""

    dyn = ("batch", "sequence")
    return [
        ("same IO as MiniLM (must be accepted)", tiny_onnx(folder / "same-io.onnx"), False),
        (
            "input 'token_type_ids' instead of 'attention_mask'",
            tiny_onnx(
                folder / "other-input.onnx", inputs=(("input_ids", "int64", dyn), ("token_type_ids", "int64", dyn))
            ),
            True,
        ),
        (
            "'attention_mask' is int32, not int64",
            tiny_onnx(
                folder / "int32-mask.onnx", inputs=(("input_ids", "int64", dyn), ("attention_mask", "int32", dyn))
            ),
            True,
        ),
        (
            "sequence fixed at 16: served buckets with longer sequences fall outside",
            tiny_onnx(
                folder / "seq16.onnx",
                inputs=(("input_ids", "int64", ("batch", 16)), ("attention_mask", "int64", ("batch", 16))),
            ),
            True,
        ),
        (
            "output 'sentence_embedding' has 256 values, not 384",
            tiny_onnx(folder / "out256.onnx", output=("sentence_embedding", "float32", ("batch", 256))),
            True,
        ),
    ]


def _variants(ctx: CaseContext, served: Served, folder: Path) -> list[tuple[str, Path, bool]]:
    """The incompatible variants, built as TensorRT plans where the backend is TensorRT."""
    variants = incompatible_variants(folder)
    if served.backend == "trt":
        p = ctx.params
        variants = [
            (
                w,
                cached_plan(
                    f,
                    p["trt_profiles"] if "seq16" not in f.name else [[[1, 16], [4, 16], [8, 16]]],
                    engine_cache_dir(),
                    log=ctx.log,
                ),
                r,
            )
            for w, f, r in variants
        ]
    return variants


class _Attempts:
    """Every variant swapped in with the check on, then at once with it off (the control),
    under the request stream. After each attempt probe requests as the service sends them (the
    served model's inputs, one per shape bucket) go through the slot: whether they are answered
    in the served model's output shapes is the clients' view of which engine serves, whatever
    the swap reported. A
    swap that got through (or an engine the probe does not recognise) is swapped back."""

    def __init__(
        self, ctx: CaseContext, served: Served, slot, variants: list, verifier, prints: Fingerprints | None = None
    ):
        self.ctx, self.served, self.slot, self.variants, self.verifier = ctx, served, slot, variants, verifier
        self.prints = prints  # which model answered a probe, told from its answer
        self.loading: dict = {}
        self.results: list[dict] = []
        self.io = slot.engine.io()  # the inputs the service sends
        self.shapes: dict | None = None

    def opener(self, path: Path, label: str, ver=None):
        def load():
            self.loading["engine"] = self.served.open(path, label=label, verifier=ver)
            return self.loading["engine"]

        return load

    def feeds_for(self, b):  # the engine being warmed gets feeds for its own inputs
        return self.served.feeds.feeds(self.loading["engine"].io(), b, 0)

    def probe(self) -> tuple[bool, str]:
        """One request per shape bucket with the served model's inputs through the slot: each
        answered, in the output shapes the served model answered with before any attempt?
        self.answered_by: the model every probe's answer is (its fingerprint), or "?"."""
        shapes, by = {}, set()
        self.answered_by = UNKNOWN
        for b in self.served.buckets:
            try:
                out, _ = self.slot.infer(self.served.feeds.feeds(self.io, b, 0))
            except Exception as e:
                return False, f"probe at {b.name} failed: {type(e).__name__}: {e}"[:200]
            shapes[b.name] = {k: list(v.shape) for k, v in out.items()}
            by.add(self.prints.which(b.name, 0, out) if self.prints is not None else UNKNOWN)
        self.answered_by = by.pop() if len(by) == 1 else UNKNOWN
        if self.shapes is None:
            self.shapes = shapes
        return shapes == self.shapes, f"probe answered {shapes}"

    def attempt(self, f: Path, check: bool) -> tuple[str, str]:

        self.loading = {}
        try:
            self.slot.swap(self.opener(f, f.name, self.verifier), self.served.buckets, self.feeds_for, check=check)
            return "accepted", f"now serving {f.name}"
        except IncompatibleEngine as e:
            return "refused", str(e)
        except Exception as e:  # the control may break at prewarm: not accepted, not refused by the check
            return "failed", f"{type(e).__name__}: {e}"[:300]

    def __call__(self) -> None:
        served, slot = self.served, self.slot
        time.sleep(0.3)
        self.probe()
        for what, f, should_refuse in self.variants:
            for check in (True, False):  # the control (check off) right after each checked attempt
                version_before = slot.version
                outcome, msg = self.attempt(f, check)
                loaded = "engine" in self.loading  # the driver's opener returned the new engine
                serves, seen = self.probe()
                answered_by = self.answered_by
                if outcome == "accepted" or not serves:  # back to the real model (no check: the served
                    # engine may be the incompatible one)
                    slot.swap(self.opener(served.file, "minilm"), served.buckets, self.feeds_for, check=False)
                self.results.append(
                    {
                        "variant": what,
                        "file": f.name,
                        "check": "on" if check else "off (control)",
                        "expected": "refused" if should_refuse else "accepted",
                        "outcome": outcome,
                        "serves_as_before": serves,
                        "message": f"{msg}; {seen}",
                        "loaded": loaded,
                        "answered_by": answered_by,
                        "version_before": version_before,
                        "version_after": slot.version,
                    }
                )
                self.ctx.log(f"{what}, check {'on' if check else 'off'}: {outcome}, {seen}")
                time.sleep(0.1)


def wrong(r: dict) -> bool:
    """A wrong verdict: the outcome is not the expected one, or a swap that had to be refused
    left the clients with an engine that does not answer as the served model did."""
    return r["outcome"] != r["expected"] or (r["expected"] == "refused" and not r["serves_as_before"])


def incompatible_swap(ctx: CaseContext) -> Record:
    if why := skip_reason(ctx):
        return Record("skipped", why)

    p = ctx.params
    served = Served(ctx)
    folder = ctx.raw_dir / "variants"
    folder.mkdir(parents=True, exist_ok=True)
    variants = _variants(ctx, served, folder)
    verifier = Verifier(write_manifest([f for _, f, _ in variants], folder / "manifest.json"))
    first = served.open(label="minilm")
    first.prewarm(served.buckets, served.feeds.feeds_for(first.io(), 0))
    facts = reported_facts([first.reported()])
    slot = EngineSlot(first)
    same_io = next(f for _, f, refuse in variants if not refuse)
    prints = Fingerprints.build(
        {served.file.name: served.file, same_io.name: same_io},
        served.buckets,
        served.feeds,
        lambda f: served.open(
            f, label=f"fingerprint {f.name}", verifier=served.verifier if f == served.file else verifier
        ),
        variants=1,
    )
    attempts = _Attempts(ctx, served, slot, variants, verifier, prints)
    try:
        records = run_stream(served, slot, p, time.perf_counter(), attempts)
    finally:
        slot.engine.close()
    results = attempts.results
    (ctx.raw_path("attempts.json")).write_text(json.dumps(results, indent=2))
    checked = [r for r in results if r["check"] == "on"]
    control = [r for r in results if r["check"] != "on"]
    m = {
        "refused": Metric(
            sum(r["outcome"] == "refused" and r["expected"] == "refused" for r in checked), "swaps", "higher"
        ),
        "expected_refusals": Metric(sum(r["expected"] == "refused" for r in checked), "swaps"),
        "wrong_verdicts": Metric(
            sum(wrong(r) for r in checked),
            "swaps",
            "lower",
            "outcome not the expected one, or a refused swap after which the probe request "
            "(the served model's inputs) is not answered as before",
        ),
        "control.wrong_verdicts": Metric(
            sum(wrong(r) for r in control), "swaps", None, "the same swaps with the compatibility check off"
        ),
        "served_changed_on_refusal": Metric(
            sum(r["outcome"] == "refused" and not r["serves_as_before"] for r in checked),
            "swaps",
            "lower",
            "refused swaps after which the probe was not answered as before",
        ),
        "failed_requests": Metric(sum(not r.ok for r in records), "requests", "lower"),
        "requests": Metric(len(records), "requests"),
        "swaps_attempted": Metric(
            len(checked), "swaps", None, "swaps attempted with the check on (what wrong_verdicts is out of)"
        ),
        "incompatible_loaded": Metric(
            sum(r["expected"] == "refused" and r["loaded"] for r in checked),
            "swaps",
            None,
            "incompatible models the driver's opener loaded aside, check on: they reached the compatibility check",
        ),
        "accepted_answered_by_new": Metric(
            sum(
                r["expected"] == "accepted" and r["outcome"] == "accepted" and r["answered_by"] == r["file"]
                for r in checked
            ),
            "swaps",
            None,
            "accepted swaps (check on) after which the probes were answered with the new model's output (its "
            "fingerprint, not the slot's label): the swap path really put the new engine in service",
        ),
    }
    series = {
        SWAP_ATTEMPTS.name: SWAP_ATTEMPTS.make({c.name: [r[c.name] for r in results] for c in SWAP_ATTEMPTS.columns})
    }
    return Record(
        "ok", metrics=m, series=series, facts=facts, details={"failures": [r.error for r in records if not r.ok][:20]}
    )
