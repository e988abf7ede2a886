"""One engine lifecycle behind one interface, whatever the backend.

    load (read the file, verify it, deserialize / create the session)
    -> create_contexts -> prewarm (one inference per optimization profile and per shape
    bucket that profile covers) -> infer ... -> close

Shapes: a *bucket* is a (batch, sequence) pair the service sends. An input's dynamic
dimensions are filled from the bucket in order (first dynamic dim = batch, second =
sequence); fixed dimensions are kept. A *profile* maps every input to (min, opt, max)
shapes; ONNX Runtime has one implicit profile whose dynamic dimensions are unbounded.

The pure functions here (shapes, coverage, the prewarm plan) are what swap.py's
compatibility check and the tests use.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.base.errors import HarnessError

UNBOUNDED = 2**31 - 1  # the max of a dynamic dimension ONNX Runtime accepts without limit


class EngineError(HarnessError):
    """An engine could not be loaded or run (a broken file, a backend error)."""


@dataclass(frozen=True)
class Bucket:
    batch: int
    seq: int

    @property
    def name(self) -> str:
        return f"b{self.batch}x{self.seq}"


@dataclass(frozen=True)
class TensorSpec:
    """One IO tensor: dims are ints, -1 for a dynamic dimension."""

    name: str
    mode: str  # "input" | "output"
    dtype: str  # numpy dtype name, e.g. int64, float32
    shape: tuple
    location: str | None = None  # TensorRT: DEVICE / HOST; None where the backend has none
    format: str | None = None  # TensorRT: LINEAR, ...

    def to_json(self) -> dict:
        return {k: v for k, v in vars(self).items() if v is not None} | {"shape": list(self.shape)}


@dataclass(frozen=True)
class Profile:
    index: int
    ranges: dict  # input name -> (min shape, opt shape, max shape)

    def to_json(self) -> dict:
        return {"index": self.index, "ranges": {k: [list(s) for s in v] for k, v in self.ranges.items()}}


def parse_buckets(raw: list) -> list[Bucket]:
    out = []
    for item in raw:
        if (
            not isinstance(item, (list, tuple))
            or len(item) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in item)
        ):
            raise ValueError(f"a shape bucket is [batch, sequence] with positive integers, got {item!r}")
        out.append(Bucket(item[0], item[1]))
    if not out:
        raise ValueError("name at least one shape bucket, e.g. [[1, 16], [8, 64]]")
    if len(set(out)) != len(out):
        raise ValueError("shape buckets are listed twice")
    return out


def inputs_of(io: list[TensorSpec]) -> list[TensorSpec]:
    return [t for t in io if t.mode == "input"]


def input_shape(spec: TensorSpec, bucket: Bucket) -> tuple:
    """The concrete shape of `spec` for a bucket (dynamic dims filled with batch, seq)."""
    fill = [bucket.batch, bucket.seq]
    out = []
    for d in spec.shape:
        if d is None or d < 0:
            if not fill:
                raise ValueError(
                    f"input {spec.name!r} has more than two dynamic dimensions {spec.shape}; "
                    "a bucket gives only batch and sequence"
                )
            out.append(fill.pop(0))
        else:
            out.append(int(d))
    return tuple(out)


def served_shapes(io: list[TensorSpec], bucket: Bucket) -> dict[str, tuple]:
    return {t.name: input_shape(t, bucket) for t in inputs_of(io)}


def shape_within(shape: tuple, lo: tuple, hi: tuple) -> bool:
    return len(shape) == len(lo) == len(hi) and all(a <= s <= b for s, a, b in zip(shape, lo, hi))


def profile_covers(profile: Profile, shapes: dict[str, tuple]) -> bool:
    """True when every input shape lies within the profile's [min, max] range."""
    for name, shape in shapes.items():
        if name not in profile.ranges:
            return False
        lo, _, hi = profile.ranges[name]
        if not shape_within(tuple(shape), tuple(lo), tuple(hi)):
            return False
    return True


def covering_profiles(profiles: list[Profile], shapes: dict[str, tuple]) -> list[Profile]:
    return [p for p in profiles if profile_covers(p, shapes)]


def prewarm_plan(profiles: list[Profile], io: list[TensorSpec], buckets: list[Bucket]) -> list[tuple[int, Bucket]]:
    """Every (profile, bucket) pair where the profile covers the bucket: one inference each.

    Raises ValueError naming a bucket no profile covers (the engine cannot serve it)."""
    plan = []
    for b in buckets:
        shapes = served_shapes(io, b)
        cover = covering_profiles(profiles, shapes)
        if not cover:
            raise ValueError(
                f"shape bucket {b.name} {shapes} is outside every optimization profile "
                f"({[p.to_json()['ranges'] for p in profiles]})"
            )
    for p in profiles:
        for b in buckets:
            if profile_covers(p, served_shapes(io, b)):
                plan.append((p.index, b))
    return plan


PREWARM_MODES = ("cold", "profile0", "all")  # no prewarm; the source's call; every profile and bucket


def source_prewarm_plan(
    profiles: list[Profile], io: list[TensorSpec], buckets: list[Bucket]
) -> list[tuple[int, Bucket]]:
    """The source's prewarm: optimization profile 0 selected, one enqueue, at the first
    served bucket profile 0 covers (its only warm-up)."""
    p0 = profiles[0]
    for b in buckets:
        if profile_covers(p0, served_shapes(io, b)):
            return [(p0.index, b)]
    raise ValueError(f"no served bucket lies within optimization profile 0 ({p0.to_json()['ranges']})")


def first_request_order(profiles: list[Profile], io: list[TensorSpec], buckets: list[Bucket]) -> list[Bucket]:
    """The order of first requests after load: buckets outside profile 0 first, then the
    other buckets the source's call did not warm, the bucket it warmed last. So the very
    first request of a fresh engine is at a shape the source's prewarm never ran."""
    warmed = {b for _, b in source_prewarm_plan(profiles, io, buckets)}
    outside = [b for b in buckets if not profile_covers(profiles[0], served_shapes(io, b))]
    inside = [b for b in buckets if b not in outside and b not in warmed]
    return outside + inside + [b for b in buckets if b in warmed]


def prewarm_plan_for(
    mode: str, profiles: list[Profile], io: list[TensorSpec], buckets: list[Bucket]
) -> list[tuple[int, Bucket]]:
    """The enqueues a prewarm mode makes: none, the source's one, or every (profile, bucket)."""
    if mode == "cold":
        return []
    if mode == "profile0":
        return source_prewarm_plan(profiles, io, buckets)
    if mode == "all":
        return prewarm_plan(profiles, io, buckets)
    raise ValueError(f"prewarm mode {mode!r} is not one of {', '.join(PREWARM_MODES)}")


def implicit_profile(io: list[TensorSpec]) -> Profile:
    """ONNX Runtime's single 'profile': fixed dims as they are, dynamic dims 1..UNBOUNDED."""
    ranges = {}
    for t in inputs_of(io):
        lo = tuple(1 if d < 0 else d for d in t.shape)
        hi = tuple(UNBOUNDED if d < 0 else d for d in t.shape)
        ranges[t.name] = (lo, lo, hi)
    return Profile(0, ranges)


Feeds = dict  # input name -> numpy array
FeedsFor = Callable[[Bucket], Feeds]


@dataclass
class PrewarmRecord:
    profile: int
    bucket: str
    ms: float


@dataclass
class Engine:
    """The interface every backend implements. Subclasses fill the `_...` methods."""

    label: str = ""
    backend: str = field(default="base", init=False)
    path: Path | None = field(default=None, init=False)
    size_bytes: int = field(default=0, init=False)
    timings: dict = field(default_factory=dict, init=False)
    calls: int = field(default=0, init=False)
    prewarmed: list = field(default_factory=list, init=False)
    closed: bool = field(default=False, init=False)

    # ---- the lifecycle -------------------------------------------------------------
    def load(self, path: Path, verifier=None) -> dict:
        """Read the file, verify it (before anything parses it), deserialize it."""
        path = Path(path)
        t0 = time.perf_counter()
        try:
            data = path.read_bytes()
        except OSError as e:
            raise EngineError(f"cannot read engine file {path}: {e}") from None
        t1 = time.perf_counter()
        if verifier is not None:
            verifier.check(path, data)  # raises ModelRefused; nothing was deserialized
        t2 = time.perf_counter()
        self._deserialize(data, path)
        t3 = time.perf_counter()
        self.path, self.size_bytes = path, len(data)
        del data
        self.timings.update(read_ms=(t1 - t0) * 1e3, verify_ms=(t2 - t1) * 1e3, deserialize_ms=(t3 - t2) * 1e3)
        return dict(self.timings)

    def create_contexts(self) -> float:
        t0 = time.perf_counter()
        self._create_contexts()
        ms = (time.perf_counter() - t0) * 1e3
        self.timings["context_ms"] = ms
        return ms

    def prewarm(self, buckets: list[Bucket], feeds_for: FeedsFor, mode: str = "all") -> list[PrewarmRecord]:
        """mode "all": one inference per optimization profile and per shape bucket it covers;
        "profile0": the source's single enqueue on profile 0; "cold": nothing."""
        records = []
        for pidx, b in prewarm_plan_for(mode, self.profiles(), self.io(), buckets):
            feeds = feeds_for(b)
            t0 = time.perf_counter()
            self._run(feeds, profile=pidx)
            records.append(PrewarmRecord(pidx, b.name, (time.perf_counter() - t0) * 1e3))
        self.prewarmed.extend(records)
        self.timings["prewarm_ms"] = sum(r.ms for r in records)
        return records

    def infer(self, feeds: Feeds) -> dict:
        if self.closed:
            raise EngineError(f"engine {self.label or self.path} is closed")
        self.calls += 1
        out = self._run(feeds, profile=None)
        if self.closed:  # released under the call (TensorRT frees its buffers): the result is not trusted
            raise EngineError(f"engine {self.label or self.path} was closed while this call was in flight")
        return out

    def close(self) -> None:
        if not self.closed:
            self._close()
            self.closed = True

    # ---- what a backend provides ---------------------------------------------------
    def io(self) -> list[TensorSpec]:
        raise NotImplementedError

    def profiles(self) -> list[Profile]:
        raise NotImplementedError

    def memory(self) -> dict:
        """Backend-specific sizes (device memory of contexts ...), for the report."""
        return {}

    def reported(self) -> dict:
        """Settings as the runtime itself reports them for this engine (read back from it, not
        what the harness asked for): e.g. the execution provider. Empty where it reports none."""
        return {}

    def _deserialize(self, data: bytes, path: Path) -> None:
        raise NotImplementedError

    def _create_contexts(self) -> None:
        raise NotImplementedError

    def _run(self, feeds: Feeds, profile: int | None) -> dict:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError


BACKENDS: dict[str, type[Engine]] = {}


def register_backend(name: str):
    """Class decorator: make an Engine subclass available to open_engine as `name`.
    Backends import this module and register themselves; this module imports none of them
    (the package's __init__ imports the backends that ship with the harness)."""

    def deco(cls: type[Engine]) -> type[Engine]:
        BACKENDS[name] = cls
        return cls

    return deco


def open_engine(backend: str, path: Path, *, verifier=None, label: str = "", **options) -> Engine:
    """Load an engine of `backend` from `path` and create its contexts."""
    cls = BACKENDS.get(backend)
    if cls is None:
        raise ValueError(f"unknown backend {backend!r}; registered: {', '.join(sorted(BACKENDS)) or 'none'}")
    eng = cls(label=label, **options)
    eng.load(path, verifier)
    eng.create_contexts()
    return eng
