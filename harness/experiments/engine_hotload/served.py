"""What every engine-hotload case serves: the engine file, its manifest, the request feeds,
the parameters all drivers share, and the skip rule for TensorRT cases."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from harness.base.errors import BadInput
from harness.experiments.engine_hotload.backend_trt import cached_plan, environment, unavailable_reason
from harness.experiments.engine_hotload.lifecycle import open_engine, parse_buckets
from harness.experiments.engine_hotload.signing import Verifier, write_manifest
from harness.experiments.engine_hotload.workload import TextFeeds, load_texts
from harness.mechanisms.onnx_models.export import engine_cache_dir, minilm_onnx
from harness.mechanisms.onnx_models.runtime import onnxruntime
from harness.model.driver_contract import INPUT_FILE, CaseContext, Param, input_path

DEFAULT_BUCKETS = [[1, 16], [1, 64], [8, 16], [8, 64]]
# TensorRT profiles, each [[min_batch, min_seq], [opt_batch, opt_seq], [max_batch, max_seq]]:
# short sequences, long sequences. Every default bucket is covered by at least one.
DEFAULT_TRT_PROFILES = [[[1, 1], [4, 16], [8, 32]], [[1, 1], [4, 64], [8, 128]]]
MIB = 2**20

COMMON = {
    "backend": Param(str, "ort", "ort (ONNX Runtime on the CPU) or trt (TensorRT on a GPU)", ("ort", "trt")),
    "model": Param(
        (str, type(None)), None, "ONNX file to serve; default: all-MiniLM-L6-v2, exported once", kind=INPUT_FILE
    ),
    "buckets": Param(list, DEFAULT_BUCKETS, "shape buckets the service sends, as [batch, sequence]"),
    "texts": Param(
        str, "data/gptcache_mock_data.json", "JSON list of texts or {similar: ...} records", kind=INPUT_FILE
    ),
    "intra_op_threads": Param(int, 1, "ONNX Runtime intra-op threads per session (0 = all cores)", min=0),
    "opt_level": Param(str, "all", "ONNX Runtime graph optimization level", ("disabled", "basic", "extended", "all")),
    "trt_profiles": Param(
        list,
        DEFAULT_TRT_PROFILES,
        "TensorRT optimization profiles: [[min_b, min_s], [opt_b, opt_s], [max_b, max_s]] each",
    ),
}


def check_common(where: str, p: dict) -> None:

    try:
        parse_buckets(p["buckets"])
    except ValueError as e:
        raise BadInput(f"{where}.buckets: {e}") from None
    for i, prof in enumerate(p["trt_profiles"]):
        ok = (
            isinstance(prof, list)
            and len(prof) == 3
            and all(isinstance(x, list) and len(x) == 2 and all(isinstance(v, int) and v >= 1 for v in x) for x in prof)
        )
        if not ok:
            raise BadInput(f"{where}.trt_profiles[{i}]: expected [[min_b, min_s], [opt_b, opt_s], [max_b, max_s]]")
        if not all(prof[0][k] <= prof[1][k] <= prof[2][k] for k in (0, 1)):
            raise BadInput(f"{where}.trt_profiles[{i}]: needs min <= opt <= max in each dimension")


@lru_cache(maxsize=4)
def text_feeds(texts_path: str):

    return TextFeeds(load_texts(input_path(texts_path)))


class Served:
    """What a case serves: the engine file, its manifest verifier, and how to open it."""

    def __init__(self, ctx: CaseContext):

        p = ctx.params
        self.params, self.backend = p, p["backend"]
        self.buckets = parse_buckets(p["buckets"])
        self.onnx = input_path(p["model"]) if p["model"] else minilm_onnx(log=ctx.log)
        if self.backend == "trt":
            self.file = cached_plan(self.onnx, p["trt_profiles"], engine_cache_dir(), log=ctx.log)
        else:
            self.file = self.onnx
        self.verifier = trusted_manifest(self.file)
        self.feeds = text_feeds(p["texts"])

    def options(self) -> dict:
        if self.backend == "ort":
            return {"intra_op_threads": self.params["intra_op_threads"], "opt_level": self.params["opt_level"]}
        return {}

    def open(self, path: Path | None = None, label: str = "", verifier=None):

        path = path or self.file
        return open_engine(
            self.backend, path, verifier=verifier or self.verifier, label=label or path.name, **self.options()
        )

    def fresh_spec(self, tokens: Path, mode: str, steady_requests: int = 0, verify: bool = False) -> dict:
        """The spec of one engine run in a fresh process (fresh.py)."""
        return {
            "backend": self.backend,
            "file": str(self.file),
            "options": self.options(),
            "manifest": str(self.verifier.manifest_path) if verify else None,
            "buckets": self.params["buckets"],
            "tokens": str(tokens),
            "mode": mode,
            "steady_requests": steady_requests,
        }


def trusted_manifest(file: Path):
    """The SHA-256 manifest kept next to a cached engine file (written when the file was made
    or first seen), as a Verifier; every load checks the file against it."""

    man = file.with_name(file.name + ".manifest.json")
    if not man.exists():
        write_manifest([file], man)
    return Verifier(man)


def skip_reason(ctx: CaseContext) -> str | None:
    if ctx.params["backend"] != "trt":
        return None

    why = unavailable_reason()
    return f"TensorRT case skipped: {why}" if why else None


def env_details(served: Served, io: list, profiles: list, memory: dict, engine_bytes: int) -> dict:
    out = {
        "backend": served.backend,
        "engine_file": served.file.name,
        "engine_bytes": engine_bytes,
        "io": io,
        "profiles": profiles,
        "memory": memory,
    }
    if served.backend == "trt":
        out["tensorrt_environment"] = environment()
    else:
        out["onnxruntime"] = onnxruntime().__version__  # imported with its telemetry off
    return out
