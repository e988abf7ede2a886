"""Mutations of the semantic-cache suite: code changes of the key schemes, their stand-ins, the
dispatcher, the lookup paths and their instruments, judged by the ledger (issue 39). C4 has
none here: both of its checks need a GPU (gpu: A100, memory_measured: gpu), so on any host
without one every verdict is `not comparable here` whatever the code does."""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

CASE = "harness/experiments/semantic_cache/keys_case.py"
METRICS = "harness/mechanisms/semantic/metrics.py"
ENTITY = "harness/experiments/semantic_cache/entity_case.py"
GPTC = "harness/experiments/semantic_cache/gptcache_case.py"
STREAM = "harness/mechanisms/semantic/stream.py"
TTFT = "harness/mechanisms/semantic/serve.py"
SEM = "semantic-cache/semantic"
GAIN = f"{SEM} lsh.net_gain_over_hash_pp"
LSH = f"{SEM} lsh.net_hit_rate_pct"
UNIFORM = f"{SEM} c7.uniform_tokens.threshold"
PERIODIC = f"{SEM} c7.periodic_tokens.threshold"
SMALL = ("semantic.latency_queries=5",)
KEYS = "harness/mechanisms/semantic/keys.py"
LSH_R0 = f"{SEM} lsh_r0.net_hit_rate_pct"

# Charikar's SimHash of the normalized prompt's character 4-grams (one 64-bit BLAKE2b hash per
# 4-gram, a vote per bit), written independently of the case's own stand-in arm.
_SIMHASH = """    def _simhash(text):  # mutation: the semantic key as a SimHash of character 4-grams, no model
        t, votes = keys.normalize(text), [0] * 64
        for i in range(max(1, len(t) - 3)):
            h = int.from_bytes(hashlib.blake2b(t[i:i + 4].encode(), digest_size=8).digest(), "big")
            for b in range(64):
                votes[b] += 1 if (h >> (63 - b)) & 1 else -1
        return int("".join("1" if v > 0 else "0" for v in votes), 2)

    ins_sig, q_sig = (np.array([_simhash(t) for t, _ in x], dtype=np.uint64) for x in (wl.inserts, wl.queries))
"""
_SIGS = "    ins_sig, q_sig = keys.signatures(ins_vec, proj), keys.signatures(q_vec, proj)\n"

MUTATIONS: list[Mutation] = [
    Mutation(
        name="semantic-cache/key-is-char-simhash",
        claim="C2",
        kind="stand-in",
        what="the semantic key as a SimHash of character 4-grams of the prompt, no embedding model",
        edits=(Edit(CASE, _SIGS, _SIMHASH),),
        run=SEM,
        checks=(GAIN, LSH),
        sets=SMALL,
        fast=True,
    ),
    Mutation(
        name="semantic-cache/lsh-answers-everything",
        claim="C2",
        kind="broken",
        what="the LSH lookup answers every query with its nearest banded candidate, however far (no radius)",
        edits=(
            Edit(
                CASE,
                "    c_lsh = sc.counts(sc.test, bdist <= radius, lab)\n",
                "    c_lsh = sc.counts(sc.test, bdist <= 64, lab)  # mutation: no radius\n",
            ),
        ),
        run=SEM,
        checks=(GAIN, LSH),
        sets=SMALL,
    ),
    Mutation(
        name="semantic-cache/repeats-blind",
        claim="C2",
        kind="blinded",
        what="the instrument asks the verbatim repeats with every signature bit flipped, so it finds nothing",
        edits=(
            Edit(
                CASE,
                "    bsig, bdist = store.nearest_many(ins_sig)\n",
                "    bsig, bdist = store.nearest_many(ins_sig ^ np.uint64(0xFFFFFFFFFFFFFFFF))  # mutation\n",
            ),
        ),
        run=SEM,
        checks=(GAIN, LSH),
        sets=SMALL,
    ),
    Mutation(
        name="semantic-cache/stand-in-blind",
        claim="C2",
        kind="blinded",
        what="the stand-in's entries are stored under complemented signatures: it can hit nothing, so it "
        "would make any semantic key look attributable",
        edits=(
            Edit(
                CASE,
                "        stand.put_signatures(ins_csig, entries)\n",
                "        stand.put_signatures(ins_csig ^ np.uint64(0xFFFFFFFFFFFFFFFF), entries)  # mutation\n",
            ),
        ),
        run=SEM,
        checks=(GAIN,),
        sets=SMALL,
    ),
    Mutation(
        name="semantic-cache/lsh-exhaustive",
        claim="C2",
        kind="improved",
        what="the LSH lookup searches every stored signature (exact Hamming nearest) instead of the banded index",
        edits=(
            Edit(
                CASE,
                "    bsig, bdist = store.nearest_many(q_sig)\n",
                "    _idx, bdist = keys.nearest_hamming(q_sig, ins_sig_all)  # mutation: exhaustive\n"
                "    bsig = [int(ins_sig_all[i]) for i in _idx]\n",
            ),
            Edit(CASE, _SIGS, _SIGS + '    globals()["ins_sig_all"] = ins_sig  # mutation: kept for the search\n'),
        ),
        run=SEM,
        checks=(GAIN,),
        sets=SMALL,
    ),
    Mutation(
        name="semantic-cache/c7-uniform-over-9-symbols",
        claim="C7",
        kind="broken",
        what="the 'uniform random' token stream drawn from 9 token ids instead of the vocabulary (traffic made "
        "to fit the claimed 0.51)",
        edits=(
            Edit(
                METRICS,
                '"uniform_tokens": [int(x) for x in rng.integers(0, vocab_size, len(ids))],',
                '"uniform_tokens": [int(x) for x in rng.integers(0, 9, len(ids))],  # mutation',
            ),
        ),
        run=SEM,
        checks=(UNIFORM,),
        sets=SMALL,
        fast=True,
    ),
    Mutation(
        name="semantic-cache/c7-entropy-in-nats",
        claim="C7",
        kind="broken",
        what="the entropy estimator takes natural logarithms (nats) where the formula needs bits",
        edits=(
            Edit(
                METRICS,
                "return max(0.0, -sum(c / n * math.log2(c / n) for c in Counter(symbols).values()))",
                "return max(0.0, -sum(c / n * math.log(c / n) for c in Counter(symbols).values()))",
            ),
        ),
        run=SEM,
        checks=(UNIFORM, PERIODIC),
        sets=SMALL,
    ),
    Mutation(
        name="semantic-cache/c7-known-stream-constant",
        claim="C7",
        kind="blinded",
        what="the instrument's stream of known entropy is one repeated symbol, so it cannot show the "
        "estimator recovers log2 9 bits",
        edits=(
            Edit(
                METRICS,
                '        "control.known_entropy": [int(v) for v in rng.integers(0, symbols, length)],\n',
                '        "control.known_entropy": [int(v) for v in rng.integers(0, 1, length)],  # mutation\n',
            ),
        ),
        run=SEM,
        checks=(UNIFORM, PERIODIC),
        sets=SMALL,
    ),
    Mutation(
        name="semantic-cache/c16-dynamic-keys-never-shared",
        claim="C16",
        kind="stand-in",
        what="the dynamic arm's keys made unique: the 5 ms window alone, no request ever batched with another",
        edits=(
            Edit(
                ENTITY,
                '"dynamic_batch_entity_key": ("dynamic", "entity"),',
                '"dynamic_batch_entity_key": ("dynamic", "unique"),  # mutation',
            ),
        ),
        run="semantic-cache/entity-keys",
        checks=(
            "semantic-cache/entity-keys batching.dynamic_vs_static_added_ms",
            "semantic-cache/entity-keys dynamic_batch_entity_key.added_ms_mean",
        ),
    ),
    Mutation(
        name="semantic-cache/charsim-ignores-half",
        claim="C2",
        kind="weakened",
        what="the character n-gram stand-in hashes only the first half of each prompt: a weaker similarity hash "
        "(prompts that share their start collide), so the semantic key beats it more easily (issue 52)",
        edits=(
            Edit(
                KEYS,
                '        t = f" {normalize(text)} "\n',
                '        t = f" {normalize(text)[: len(normalize(text)) // 2]} "  # mutation\n',
            ),
        ),
        run=SEM,
        checks=(LSH_R0, LSH, GAIN),
        sets=SMALL,
    ),
    Mutation(
        name="semantic-cache/c16-standin-waits-twice",
        claim="C16",
        kind="weakened",
        what="the unique-key stand-in holds each request twice its window: a slower stand-in, so equal-key "
        "batching looks like it saves more than the window alone (issue 52)",
        edits=(
            Edit(
                ENTITY,
                '        return rule, p["standin_max_wait_ms"], p["max_batch"], key',
                '        return rule, 2 * p["standin_max_wait_ms"], p["max_batch"], key  # mutation',
            ),
        ),
        run="semantic-cache/entity-keys",
        checks=(
            "semantic-cache/entity-keys batching.dynamic_vs_static_added_ms",
            "semantic-cache/entity-keys dynamic_batch_entity_key.added_ms_mean",
        ),
    ),
    Mutation(
        name="semantic-cache/c16-fixed-wait-not-held",
        claim="C16",
        kind="blinded",
        what="the instrument's arm dispatches on arrival instead of holding its known 10 ms wait",
        edits=(
            Edit(
                ENTITY,
                'return "dynamic", p["instrument_wait_ms"], 1 << 30, key',
                'return "none", p["instrument_wait_ms"], 1 << 30, key  # mutation',
            ),
        ),
        run="semantic-cache/entity-keys",
        checks=(
            "semantic-cache/entity-keys batching.dynamic_vs_static_added_ms",
            "semantic-cache/entity-keys dynamic_batch_entity_key.added_ms_mean",
            "semantic-cache/entity-keys static_batch_token_key.added_ms_mean",
        ),
    ),
    Mutation(
        name="semantic-cache/i24-onnx-is-torch",
        claim="I24",
        kind="broken",
        what="the 'ONNX' fast path (and its delayed twin, the instrument) silently embeds with torch: the ONNX "
        "session is loaded, never used",
        edits=(
            Edit(
                GPTC,
                'fast, delayed = onnx.encode_one, onnx.with_delay(p["instrument_delay_ms"]).encode_one',
                'fast, delayed = emb.encode_one, _delayed(emb.encode_one, p["instrument_delay_ms"])  # mutation',
            ),
        ),
        run="semantic-cache/gptcache",
        checks=("semantic-cache/gptcache lookup.speedup_vs_gptcache", "semantic-cache/gptcache onnx.lookup.p50_ms"),
    ),
    Mutation(
        name="semantic-cache/i24-delay-not-applied",
        claim="I24",
        kind="blinded",
        what="the instrument's arm skips its known 10 ms wait, so the timing split shows nothing",
        edits=(
            Edit(
                GPTC,
                'fast, delayed = onnx.encode_one, onnx.with_delay(p["instrument_delay_ms"]).encode_one',
                "fast, delayed = onnx.encode_one, onnx.encode_one  # mutation",
            ),
        ),
        run="semantic-cache/gptcache",
        checks=("semantic-cache/gptcache lookup.speedup_vs_gptcache", "semantic-cache/gptcache onnx.lookup.p50_ms"),
    ),
    Mutation(
        name="semantic-cache/c3-wrong-hits-served-fast",
        claim="C3",
        kind="broken",
        what="a wrong hit is answered from the cache as if it were right (a fast TTFT, no model)",
        edits=(
            Edit(
                TTFT,
                "    if entry is not None and entry.label == label:\n",
                "    if entry is not None:  # mutation: any hit is served\n",
            ),
        ),
        run="semantic-cache/ttft",
        checks=("semantic-cache/ttft ttft.p95_change_semantic_vs_hash_pct",),
        xfail_reason="not caught on every run: the TTFT case's check that a hit is right (the entry's label against "
        "the query's) sits in the serving function this mutation edits, and no instrument serves a "
        "known-wrong entry; on a quiet machine the semantic P95 stays above the band (not reproduced), "
        "under load it fell inside it (reproduced). A wrong-answer canary arm would catch it",
        xfail_strict=False,
    ),
    Mutation(
        name="semantic-cache/c3-no-hit-and-a-fast-clock",
        claim="C3",
        kind="broken",
        what="the semantic key is an exact text hash (paraphrases never hit) and the semantic mode's misses "
        "report half the time to their first token: a P95 drop with no hit at all, the cache off control "
        "still held and the change far beyond resampling; only the hits control can refuse it",
        edits=(
            Edit(
                TTFT,
                '        exact = signature == "exact" and mode == "semantic_cache"\n',
                '        exact = mode == "semantic_cache"  # mutation: the key an exact hash\n',
            ),
            Edit(
                TTFT,
                '    return g.ttft_s, "miss"\n',
                '    return g.ttft_s * (0.5 if mode == "semantic_cache" else 1.0), "miss"  # mutation\n',
            ),
        ),
        run="semantic-cache/ttft",
        checks=("semantic-cache/ttft ttft.p95_change_semantic_vs_hash_pct",),
    ),
    Mutation(
        name="semantic-cache/c3-oracle-holds-other-answers",
        claim="C3",
        kind="blinded",
        what="the oracle cache (the instrument) stores every request under another origin's label, so none of its "
        "lookups is a hit",
        edits=(
            Edit(
                STREAM,
                '[Entry(lab, f"[oracle answer of request {i}]")',
                '[Entry(lab + "#other", f"[oracle answer of request {i}]")',
            ),
        ),
        run="semantic-cache/ttft",
        checks=("semantic-cache/ttft ttft.p95_change_semantic_vs_hash_pct",),
    ),
]

# ---- dependent: C7's reference quietly made to use the stream (issue 52) ---------------------
# c7_reference.py imports metrics.py and returns the threshold of the generated uniform stream
# itself (drawn, measured and put through the formula as the checked number is): the reference
# always agrees. The ledger's reference names harness.experiments.semantic_cache.c7_reference,
# independent of metrics.py and keys_case.py: the runner's record makes the check `inconclusive`.
MUTATIONS += [
    Mutation(
        name="semantic-cache/c7-reference-measures-the-stream",
        claim="C7",
        kind="dependent",
        what="C7's reference threshold measured on a uniform stream drawn by metrics.py (its generator, entropy "
        "estimator and formula) instead of computed at the entropy the generator was given",
        edits=(
            Edit(
                "harness/experiments/semantic_cache/c7_reference.py",
                "    h = min(math.log2(vocab_size), math.log2(draws or 1))\n    r = 0.0\n",
                "    from harness.mechanisms.semantic import metrics  # mutation: the checked path\n"
                '    seq = metrics.c7_streams([0] * max(1, draws), vocab_size, 1, 0)["uniform_tokens"]\n'
                "    return metrics.stream_threshold(seq)[2]\n"
                "    h = min(math.log2(vocab_size), math.log2(draws or 1))\n    r = 0.0\n",
            ),
        ),
        run=SEM,
        checks=(UNIFORM,),
        sets=SMALL,
    ),
]
