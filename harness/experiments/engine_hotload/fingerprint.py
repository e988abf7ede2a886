"""Which model answered a request, told from its answer alone (the exercise evidence of the
hot swap: a request answered by the new engine is one whose output only the new model can
produce, never the slot's label or version).

`Fingerprints.build` opens every model version apart from the slot (its own engine, closed
after), runs each request the stream can send (every shape bucket and feed variant) and keeps
the answers. `which(bucket, variant, out)` names the version whose reference answer `out`
matches: the nearest one, if it lies within a tenth of the distance between the versions'
answers to that request; otherwise "?" (an engine neither version is). Two versions that
answer a request alike cannot be told apart: building refuses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.base.errors import HarnessError
from harness.experiments.engine_hotload.workload import VARIANTS

if TYPE_CHECKING:
    import numpy as np

UNKNOWN = "?"
MATCH_FRACTION = 0.1  # an answer is a version's when within this fraction of the versions' separation


def _first_output(out: dict):
    import numpy as np

    return np.asarray(out[sorted(out)[0]], dtype=np.float64)


class Fingerprints:
    def __init__(self, refs: dict[str, dict[tuple[str, int], np.ndarray]]):
        self.refs = refs  # version name -> {(bucket name, variant): first output}
        self.separation: dict[tuple[str, int], float] = {}
        names = list(refs)
        keys = set.intersection(*(set(r) for r in refs.values())) if refs else set()
        for key in keys:
            seps = [_dist(refs[a][key], refs[b][key]) for i, a in enumerate(names) for b in names[i + 1 :]]
            self.separation[key] = min(seps) if seps else float("inf")

    @classmethod
    def build(cls, versions: dict, buckets: list, feeds, open_engine, variants: int = VARIANTS) -> "Fingerprints":
        """versions: {name: path}; open_engine(path) -> an engine opened apart from the slot;
        variants: the feed variants of each bucket the requests use (the first `variants`)."""
        refs = {}
        for name, path in versions.items():
            eng = open_engine(path)
            try:
                refs[name] = {
                    (b.name, v): _first_output(eng.infer(feeds.feeds(eng.io(), b, v)))
                    for b in buckets
                    for v in range(variants)
                }
            finally:
                eng.close()
        fp = cls(refs)
        alike = [k for k, s in fp.separation.items() if not s > 1e-5]
        if len(refs) > 1 and alike:
            raise HarnessError(
                f"the model versions {', '.join(refs)} answer {len(alike)} requests alike "
                f"(e.g. {alike[0]}): a client could not tell which one served"
            )
        return fp

    def which(self, bucket: str, variant: int, out: dict) -> str:
        key = (bucket, variant % VARIANTS)
        try:
            got = _first_output(out)
        except (KeyError, IndexError, TypeError, ValueError):
            return UNKNOWN
        best, best_d = UNKNOWN, float("inf")
        for name, r in self.refs.items():
            if key in r and r[key].shape == got.shape:
                d = _dist(r[key], got)
                if d < best_d:
                    best, best_d = name, d
        sep = self.separation.get(key, float("inf"))
        limit = MATCH_FRACTION * sep if sep != float("inf") else 1e-4
        return best if best_d <= limit else UNKNOWN


def _dist(a, b) -> float:
    import numpy as np

    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b))) if a.size else 0.0
