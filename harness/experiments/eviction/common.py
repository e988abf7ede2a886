"""What the eviction cases share: the trace parameters and the trace they build (real tokens
or synthetic Zipf draws), its corpus passes, the head definition and the percent metric."""

from __future__ import annotations

from functools import lru_cache

from harness.mechanisms.cache_policies import traces
from harness.model.driver_contract import Metric, Param, input_path

from .redis_replay import refuse_names_not_in_redis

HEAD_DEFINITION = (
    "head = the ceil(head_fraction x distinct) most frequent tokens of the whole trace "
    "(ties by smaller token id); long-tail retention = hit rate on requests for tokens "
    "outside the head"
)

TRACE_PARAMS = {
    "trace": Param(str, "real", "real: the tokenized text; zipf: synthetic Zipf draws", ("real", "zipf")),
    "n_requests": Param(int, 200000, "requests (tokens) in the trace", min=100),
    "seed": Param(int, 1, "seed of the text order / Zipf draws; repetition r uses seed + r - 1"),
    "head_fraction": Param(
        float, 0.01, "the head: this fraction of the distinct tokens, most frequent first", min=1e-6, max=0.999999
    ),
    "text_file": Param(
        str, "data/gptcache_mock_data.json", "JSON list of {origin, similar} texts (relative to the repo)"
    ),
    "tokenizer": Param(str, "minilm", "the real tokenizer: all-MiniLM-L6-v2's WordPiece", traces.TOKENIZERS),
    "zipf_alpha": Param(float, 1.0, "Zipf exponent of the synthetic trace", min=0),
    "zipf_keys": Param(int, 10000, "distinct keys of the synthetic trace", min=2),
}


def check_trace(where: str, p: dict) -> None:
    refuse_names_not_in_redis(where, p)


def text_path(p: dict):

    return input_path(p["text_file"])


@lru_cache(maxsize=4)
def real_docs(path: str, tokenizer: str):
    tok = traces.load_tokenizer(tokenizer)
    return tuple(traces.tokenize(traces.load_texts(path), tok)), tok


def build_trace(p: dict, repetition: int = 1, n_requests: int | None = None) -> traces.Trace:
    seed = p["seed"] + repetition - 1
    n = n_requests or p["n_requests"]
    if p["trace"] == "zipf":
        return traces.zipf_trace(n, p["zipf_keys"], p["zipf_alpha"], seed)
    docs, _ = real_docs(str(text_path(p)), p["tokenizer"])
    t = traces.text_trace(list(docs), n, seed, name="real")
    t.meta.update({"text_file": p["text_file"], "tokenizer": p["tokenizer"]})
    return t


def corpus_passes(trace: traces.Trace) -> float | None:
    """How many times the trace goes through the corpus (requests / corpus tokens); None for
    a synthetic trace."""
    total = trace.meta.get("corpus_tokens")
    return len(trace) / total if total else None


def percent(x: float, note: str = "") -> Metric:
    return Metric(x, "%", "higher", note)
