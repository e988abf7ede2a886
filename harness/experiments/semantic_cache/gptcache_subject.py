"""GPTCache 0.1.44 as a subject: its SQLite + Faiss store, its `SearchDistanceEvaluation`, and
the project's all-MiniLM-L6-v2 passed in as its `embedding_func` (its own model classes
download weights at run time: never used).

`missing()` says why GPTCache cannot run (checked before anything of it is imported:
GPTCache's own import helpers try to pip-install a missing faiss or sqlalchemy at run time).
`GptCache` is one cache in a temporary folder: `import_data` bulk-loads question/answer pairs
(as GPTCache's own benchmark does), `lookup` sends one prompt through `gptcache.adapter.api.get`
and returns the answer, GPTCache's similarity score of the answer (4 - squared L2 distance,
normalised to [0, 1] by its threshold rule, through its `hit_callback`) and the time split read
from GPTCache's own report counters: embedding, search (Faiss search + the evaluation) and
store (the rest of the call: the SQLite fetch of the entry, the report row GPTCache writes per
hit, pre/post-processing).
"""

from __future__ import annotations

import importlib.util
import logging
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, cast

import numpy as np

VERSION = "0.1.44"
NEEDS = (("gptcache", "gptcache"), ("faiss", "faiss-cpu"), ("sqlalchemy", "SQLAlchemy"))
INSTALL = 'pip install -c constraints.txt -e ".[gptcache]" (make setup installs it)'


def missing() -> str | None:
    """None when GPTCache and what its SQLite + Faiss store imports are installed, else the reason."""
    gone = [pkg for mod, pkg in NEEDS if importlib.util.find_spec(mod) is None]
    if gone:
        return f"GPTCache is not installed here ({', '.join(gone)} missing): {INSTALL}"
    from importlib.metadata import version

    have = version("gptcache")
    if have != VERSION:
        return f"GPTCache {have} is installed; this case measures {VERSION}: {INSTALL}"
    return None


def filesystem(path: Path) -> str:
    """The file system type of the mount holding `path` ("unknown" when it cannot be told)."""
    import psutil

    best, kind = "", "unknown"
    target = str(Path(path).resolve())
    for part in psutil.disk_partitions(all=True):
        mp = part.mountpoint.rstrip("/") or "/"
        if (target == mp or target.startswith(mp + "/") or mp == "/") and len(mp) > len(best):
            best, kind = mp, part.fstype
    return kind


def store_facts(disk: Path, ram: str | None) -> dict:
    """Where GPTCache kept its SQLite file in this run (case facts)."""
    facts = {"gptcache_disk_fs": filesystem(disk)}
    if ram:
        facts["gptcache_ram_fs"] = filesystem(Path(ram))
    return facts


class _Closed:
    def close(self) -> None:  # GPTCache's atexit hook closes the data manager once more
        return None


@dataclass
class Split:
    total_ms: float
    embed_ms: float
    search_ms: float
    store_ms: float
    sqlite_get_ms: float


@dataclass
class GptCache:
    """One GPTCache instance; `embed(text) -> float32 vector` is what it calls as embedding_func."""

    embed: Callable[[str], Any]  # text -> its vector (array-like)
    dim: int = 384
    threshold: float = 0.8
    max_size: int = 1000
    base_dir: str | None = None  # the folder of its SQLite file and Faiss index (a temporary folder inside)
    _dir: tempfile.TemporaryDirectory[str] | None = field(default=None, init=False, repr=False)
    _cache: Any = field(default=None, init=False, repr=False)  # a gptcache.Cache once entered (GPTCache has no hints)

    def __enter__(self) -> "GptCache":
        import faiss

        handlers = logging.root.handlers[:]
        from gptcache import Cache, Config  # its import calls logging.basicConfig on the root logger
        from gptcache.manager import CacheBase, VectorBase, get_data_manager
        from gptcache.processor.pre import get_prompt
        from gptcache.similarity_evaluation import SearchDistanceEvaluation

        logging.root.handlers[:] = handlers

        faiss.omp_set_num_threads(1)  # one thread, as every other path here
        self._dir = tempfile.TemporaryDirectory(prefix="gptcache-", dir=self.base_dir)
        d = Path(self._dir.name)
        with warnings.catch_warnings():  # GPTCache's SQL store calls SQLAlchemy 1.x's declarative_base
            warnings.simplefilter("ignore")
            dm = get_data_manager(
                CacheBase("sqlite", sql_url=f"sqlite:///{d / 'sqlite.db'}"),
                VectorBase("faiss", dimension=self.dim, index_path=str(d / "faiss.index")),
                max_size=self.max_size,
            )
        self._cache = Cache()
        self._cache.init(
            pre_embedding_func=get_prompt,
            embedding_func=self._embedding,
            data_manager=dm,
            similarity_evaluation=SearchDistanceEvaluation(),
            config=Config(similarity_threshold=self.threshold),
        )
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._cache.data_manager.close()
        finally:
            self._cache.data_manager = _Closed()
            cast("tempfile.TemporaryDirectory[str]", self._dir).cleanup()  # made by __enter__

    def _embedding(self, data, **_kwargs) -> np.ndarray:
        return np.asarray(self.embed(data), dtype=np.float32)

    def set_threshold(self, t: float) -> None:
        self._cache.config.similarity_threshold = float(t)

    def own_hits(self) -> int:
        """The hits GPTCache counted itself (its report's hint_cache_count, raised by its own
        `get` when it returns a cached answer): the second observer of its hit rate."""
        return int(self._cache.report.hint_cache_count)

    def import_data(self, questions: list[str], answers: list[str]) -> None:
        self._cache.import_data(questions, answers)

    def lookup(self, prompt: str) -> tuple[str | None, float | None, Split]:
        """(answer or None, the answer's normalised score or None, the time split)."""
        from gptcache.adapter.api import get

        rep = self._cache.report
        before = [c.total_time for c in (rep.op_embedding, rep.op_search, rep.op_evaluation, rep.op_data)]
        scores: list[float] = []
        t0 = time.perf_counter()
        answer = get(prompt, cache_obj=self._cache, hit_callback=lambda hits: scores.extend(s for _, s in hits))
        total = 1000 * (time.perf_counter() - t0)
        emb, search, evaluation, data = (
            1000 * (c.total_time - b)
            for c, b in zip((rep.op_embedding, rep.op_search, rep.op_evaluation, rep.op_data), before)
        )
        split = Split(total, emb, search + evaluation, max(0.0, total - emb - search - evaluation), data)
        return answer, (max(scores) if scores and answer is not None else None), split
