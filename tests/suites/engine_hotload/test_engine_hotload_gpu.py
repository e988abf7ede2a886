"""NVML telemetry and the TensorRT backend's skip path.

The machine these tests were written on has neither a GPU nor tensorrt: the TensorRT
backend is checked for importability, its pure helpers and its skip reason; it runs for
real only on a GPU host (the trt-* cases of harness/experiments/engine_hotload/suite.yaml).
"""

from __future__ import annotations

import importlib.util
import types

import pytest

from harness.experiments.engine_hotload import gpu
from harness.experiments.engine_hotload.backend_trt import profile_shapes, unavailable_reason
from harness.model.driver_contract import CaseContext, Target
from tests import REPO

HAS_TRT = importlib.util.find_spec("tensorrt") is not None


def _nvml_without_driver():
    """An NVML module whose nvmlInit fails the way pynvml does on a host without a driver
    (the GPU is the hardware not here; the exception is pynvml's own)."""
    import pynvml

    def init():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    return types.SimpleNamespace(nvmlInit=init, nvmlShutdown=lambda: None)


def test_nvml_absent_is_reported_with_the_reason():
    st = gpu.nvml_status(_nvml_without_driver())
    assert st["present"] is False and st["devices"] == []
    assert "NVML did not initialise" in st["reason"] and "NVMLError_LibraryNotFound" in st["reason"]


def test_nvml_status_on_this_machine_never_raises():
    st = gpu.nvml_status()
    if st["present"]:
        assert st["devices"] and st["devices"][0]["memory_total_mib"] > 0
    else:
        assert st["reason"].startswith("no GPU")


SAMPLER_PROBE = """
import json, time
from tests.suites.engine_hotload.test_engine_hotload_gpu import _nvml_without_driver
from harness.experiments.engine_hotload import gpu
s = gpu.MemorySampler(interval_s=0.005, nvml=_nvml_without_driver()).start()
deadline = time.monotonic() + 5  # a loaded machine may starve the sampler thread a while:
while time.monotonic() < deadline and len(s.samples) < 2:  # the baseline is sampled before the block
    time.sleep(0.01)
block = bytearray(64 * 2**20)  # touch 64 MiB so the RSS rises
for i in range(0, len(block), 4096):
    block[i] = 1
touched = s.now()
deadline = time.monotonic() + 5
while time.monotonic() < deadline and sum(x.t > touched for x in list(s.samples)) < 2:
    time.sleep(0.01)
samples = s.stop()
base, extra = gpu.peak_extra(samples, 0.0, samples[-1].t)
print(json.dumps({"gpu": s.gpu, "n": len(samples), "gpu_values": [x.gpu_used_bytes for x in samples],
                  "base": base, "extra": extra}))
"""


def test_memory_sampler_without_gpu_still_samples_rss():
    """In a fresh interpreter: in this long test process a 64 MiB block may come from memory
    that is already resident, or other memory may be freed meanwhile, and hide the rise."""
    import json
    import subprocess
    import sys

    root = REPO
    out = subprocess.run([sys.executable, "-c", SAMPLER_PROBE], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["gpu"]["present"] is False and "NVML" in got["gpu"]["reason"]
    assert got["n"] >= 3 and all(v is None for v in got["gpu_values"])
    assert got["base"] > 0 and got["extra"] >= 32 * 2**20  # the 64 MiB block shows up in the sampled RSS


def test_peak_extra_uses_the_last_sample_before_the_window():
    S = gpu.Sample
    samples = [S(0.0, 100), S(1.0, 110), S(2.0, 300), S(3.0, 150), S(4.0, 500)]
    assert gpu.peak_extra(samples, 1.5, 3.5) == (110.0, 190.0)
    assert gpu.peak_extra(samples, -1.0, 0.5) == (100.0, 0.0)


def test_profile_shapes_fill_batch_and_sequence():
    rng = [[1, 1], [4, 16], [8, 32]]
    assert profile_shapes((-1, -1), rng) == ((1, 1), (4, 16), (8, 32))
    assert profile_shapes((-1, 7), rng) == ((1, 7), (4, 7), (8, 7))


@pytest.mark.skipif(HAS_TRT, reason="tensorrt is installed here; the skip path is for hosts without it")
def test_trt_unavailable_reason_names_tensorrt_and_the_gpu():
    why = unavailable_reason(nvml=_nvml_without_driver())
    assert "tensorrt is not installed" in why and "pip install tensorrt" in why
    assert "no GPU" in why


def test_trt_cases_are_skipped_with_the_reason_where_trt_or_gpu_is_missing(tmp_path):
    from harness.model.driver_contract import load_all

    drivers = load_all()
    why = unavailable_reason()
    if why is None:
        pytest.skip("tensorrt and a GPU are present: the trt cases run for real (suite engine-hotload)")
    for name in (
        "engine-hotload-cold-start",
        "engine-hotload-prewarm",
        "engine-hotload-hot-swap",
        "engine-hotload-incompatible-swap",
    ):
        d = drivers[name]
        params = d.resolve_params("test", {"backend": "trt"})
        ctx = CaseContext("engine-hotload", "trt", 1, "local", params, tmp_path, Target("none"), log=lambda m: None)
        out = d.run(ctx)
        assert out.status == "skipped" and out.reason.startswith("TensorRT case skipped: ")
        assert why in out.reason


def test_trt_engine_class_is_importable_without_tensorrt():
    from harness.experiments.engine_hotload.backend_trt import TrtEngine

    eng = TrtEngine(label="x")
    assert eng.backend == "tensorrt" and eng.io() == [] and eng.memory() == {}
