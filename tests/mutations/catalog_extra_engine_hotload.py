"""More mutations of the engine-hotload suite (claims C14 and C21): one for each ledger check
that the first catalog (catalog_engine_hotload.py) names no mutation for (issue 39, "done
when": every check's row names the mutations that break it).

The TensorRT cases (trt-prewarm, trt-hot-swap) need a GPU (gpu: A100): here they are skipped
and every verdict is `not comparable here`; their mutations are judged on the lab. They edit
the same code the ONNX Runtime cases run (the swap, the request threads, the prewarm, the
NVML sampler), which the TensorRT engine shares.
"""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

PKG = "harness/experiments/engine_hotload/"
SWAP, WORKLOAD, LIFECYCLE = PKG + "swap.py", PKG + "workload.py", PKG + "lifecycle.py"
SIGNING, GPU = PKG + "signing.py", PKG + "gpu.py"
TRT_SWAP = "engine-hotload/trt-hot-swap "
TRT_PREWARM = "engine-hotload/trt-prewarm "

# the request threads log a call that raised as answered (its error text kept)
_FAILED_AS_OK = Edit(
    WORKLOAD,
    '                    t - self.t0, (time.perf_counter() - t) * 1e3, False, k, b.name, -1, f"{type(e).__name__}: {e}"[:300]\n',
    (
        "                    t - self.t0,\n"
        "                    (time.perf_counter() - t) * 1e3,\n"
        "                    True,\n"
        "                    k,\n"
        "                    b.name,\n"
        "                    -1,  # mutation\n"
        '                    f"{type(e).__name__}: {e}"[:300],\n'
    ),
)
_HOLDS_LOCK = Edit(
    SWAP,
    "            with contextlib.nullcontext() if aside else self._cond:\n",
    "            with self._cond:  # mutation: loaded and warmed under the slot's lock\n",
)

MUTATIONS = [
    # ---- C14: hot swap, ONNX Runtime ------------------------------------------------------
    Mutation(
        name="engine-hotload/failed-calls-logged-as-answers",
        claim="C14",
        kind="blinded",
        what="the request threads log a call that raised as answered (its error text kept): no failure can be "
        "counted, the restart control's outage included",
        edits=(_FAILED_AS_OK,),
        run="engine-hotload/hot-swap",
        checks=("engine-hotload/hot-swap failed_requests",),
        timeout_s=300,
    ),
    # ---- C14: TensorRT (judged on the lab: gpu A100) --------------------------------------
    Mutation(
        name="engine-hotload/trt-failed-calls-logged-as-answers",
        claim="C14",
        kind="blinded",
        what="TensorRT: the request threads log a call that raised as answered: no failure can be counted "
        "(judged on the lab: the check needs an A100)",
        edits=(_FAILED_AS_OK,),
        run="engine-hotload/trt-hot-swap",
        checks=(TRT_SWAP + "failed_requests",),
        timeout_s=400,
    ),
    Mutation(
        name="engine-hotload/trt-swap-holds-the-lock",
        claim="C14",
        kind="broken",
        what="TensorRT: the hot swap deserializes and warms the new engine while holding the slot's lock, so "
        "every request waits for it (judged on the lab: the checks need an A100)",
        edits=(_HOLDS_LOCK,),
        run="engine-hotload/trt-hot-swap",
        checks=(TRT_SWAP + "swap.window_max_over_call", TRT_SWAP + "swap.gap_over_steady"),
        timeout_s=400,
    ),
    Mutation(
        name="engine-hotload/trt-sampler-repeats-first-reading",
        claim="C14",
        kind="blinded",
        what="TensorRT: the NVML sampler repeats its first reading of the GPU memory used, so no swap's or "
        "restart's peak can be seen (judged on the lab: the check needs an A100)",
        edits=(
            Edit(
                GPU,
                "                s.gpu_used_bytes, s.gpu_total_bytes = int(mem.used), int(mem.total)\n",
                "                s.gpu_used_bytes, s.gpu_total_bytes = int(mem.used), int(mem.total)\n"
                "                if self.samples and self.samples[0].gpu_used_bytes is not None:  # mutation\n"
                "                    s.gpu_used_bytes = self.samples[0].gpu_used_bytes\n",
            ),
        ),
        run="engine-hotload/trt-hot-swap",
        checks=(TRT_SWAP + "gpu_peak_extra_over_engine",),
        timeout_s=400,
    ),
    Mutation(
        name="engine-hotload/trt-prewarm-runs-nothing",
        claim="C14",
        kind="broken",
        what="TensorRT: prewarm runs no inference in any mode (the source's profile-0 call and every-profile "
        "alike are no-ops) (judged on the lab: the checks need an A100)",
        edits=(
            Edit(
                LIFECYCLE,
                "        for pidx, b in prewarm_plan_for(mode, self.profiles(), self.io(), buckets):\n",
                '        for pidx, b in prewarm_plan_for("cold", self.profiles(), self.io(), buckets):  # mutation\n',
            ),
        ),
        run="engine-hotload/trt-prewarm",
        checks=(TRT_PREWARM + "prewarmed.first_over_p99", TRT_PREWARM + "profile0.first_over_p99"),
        timeout_s=400,
    ),
    # ---- C21: run-time recheck ------------------------------------------------------------
    Mutation(
        name="engine-hotload/recheck-trusts-verified-paths",
        claim="C21",
        kind="broken",
        what="the run-time recheck remembers the paths it has verified and trusts them after: a file changed on "
        "disk after its first recheck is never hashed again",
        edits=(
            Edit(
                SIGNING,
                "        try:\n            self.check(path, Path(path).read_bytes())\n",
                '        seen = self.__dict__.setdefault("_rechecked", set())  # mutation: verified once, trusted\n'
                "        if str(path) in seen:\n"
                "            return True\n"
                "        seen.add(str(path))\n"
                "        try:\n            self.check(path, Path(path).read_bytes())\n",
            ),
        ),
        run="engine-hotload/signed-load",
        checks=("engine-hotload/signed-load runtime_recheck_detects_change",),
        timeout_s=300,
    ),
]
