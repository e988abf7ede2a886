"""More mutations of the semantic-cache suite: one for each ledger check that the first catalog
(catalog_semantic_cache.py) names no mutation for (issue 39, "done when": every check's row
names the mutations that break it).

C3's and C4's checks need a GPU (gpu: A100; memory_measured: gpu): here every verdict is
`not comparable here` and the framework skips them; their edits are judged on the lab.
"""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

PKG = "harness/experiments/semantic_cache/"
CASE, ENTITY, ENTITY_KEYS = PKG + "keys_case.py", PKG + "entity_case.py", PKG + "entity_keys.py"
GPTC, PROBE = PKG + "gptcache_case.py", PKG + "memory_probe.py"
TTFT = "harness/mechanisms/semantic/serve.py"
ACC, KEYS = PKG + "gptcache_accuracy.py", "harness/mechanisms/semantic/keys.py"
SEM = "semantic-cache/semantic "
ENT = "semantic-cache/entity-keys "
GPT = "semantic-cache/gptcache "
SMALL = ("semantic.latency_queries=5",)

_SIGS = "    ins_sig, q_sig = keys.signatures(ins_vec, proj), keys.signatures(q_vec, proj)\n"
# a bag of character 3-grams (hashed into 4096 buckets) through hyperplanes of its own: spelling, no model
_TRIGRAMS = (
    "    _p3 = keys.projection(4096, seed + 1)  # mutation: character 3-grams in the embedding's place\n"
    "    ins_sig, q_sig = (keys.signatures(keys.char_ngram_vectors([t for t, _ in x], 3, 4096), _p3)\n"
    "                      for x in (wl.inserts, wl.queries))\n"
)

MUTATIONS: list[Mutation] = [
    # ---- C2 ------------------------------------------------------------------------------
    Mutation(
        name="semantic-cache/c2-hash-entries-under-normalized-key",
        claim="C2",
        kind="broken",
        what="the prompt hash's entries are written under the normalized prompt's key, so the raw prompt hash "
        "looks up keys that were never written",
        edits=(
            Edit(
                CASE,
                "        store.put_many([(keys.exact_key(t), e) for (t, _), e in zip(wl.inserts, entries)])\n",
                "        store.put_many([(keys.exact_key(t, True), e) for (t, _), e in zip(wl.inserts, entries)])"
                "  # mutation\n",
            ),
        ),
        run="semantic-cache/semantic",
        checks=(SEM + "hash.correct_hit_rate_pct",),
        sets=SMALL,
    ),
    Mutation(
        name="semantic-cache/c2-hash-of-truncated-prompt",
        claim="C2",
        kind="broken",
        what="the prompt hash keys only the prompt's first 32 characters: prompts that share a prefix share an "
        "entry, so one is answered with another's answer",
        edits=(
            Edit(
                KEYS,
                '    return "hash_" + hashlib.sha256(text.encode()).hexdigest()',
                '    return "hash_" + hashlib.sha256(text[:32].encode()).hexdigest()  # mutation',
            ),
        ),
        run="semantic-cache/semantic",
        checks=(SEM + "hash.correct_hit_rate_pct",),
        sets=SMALL,
    ),
    Mutation(
        name="semantic-cache/c2-r0-key-is-char-trigrams",
        claim="C2",
        kind="stand-in",
        what="the sem_<hex> key made of a hashed bag of character 3-grams through hyperplanes, no embedding model "
        "(a cheaper similarity hash than the SBERT key, judged at radius 0)",
        edits=(Edit(CASE, _SIGS, _TRIGRAMS),),
        run="semantic-cache/semantic",
        checks=(SEM + "lsh_r0.net_hit_rate_pct",),
        sets=SMALL,
    ),
    # ---- C7 ------------------------------------------------------------------------------
    Mutation(
        name="semantic-cache/c7-dynamic-lookups-at-static",
        claim="C7",
        kind="broken",
        what="the lookups said to run at the computed dynamic threshold run at the static 0.75 (the dynamic "
        "threshold is computed and reported, never applied)",
        edits=(
            Edit(
                CASE,
                "    c_dyn, c_static, c_strict = at(dyn), at(static), at(strict)\n",
                "    c_dyn, c_static, c_strict = at(static), at(static), at(strict)  # mutation\n",
            ),
        ),
        run="semantic-cache/semantic",
        checks=(SEM + "c7.static_loss_pct",),
        sets=SMALL,
    ),
    # ---- C16 -----------------------------------------------------------------------------
    Mutation(
        name="semantic-cache/c16-entity-key-is-normalized-hash",
        claim="C16",
        kind="stand-in",
        what="the template/entity key replaced by a hash of the normalized prompt (case and spaces folded): "
        "no template, no entity extraction",
        edits=(
            Edit(
                ENTITY_KEYS,
                "def entity_key(text: str) -> str:\n    return extract(text).key",
                "def entity_key(text: str) -> str:\n"
                '    return "tpl_" + hashlib.sha256(normalize(text).encode()).hexdigest()  # mutation',
            ),
        ),
        run="semantic-cache/entity-keys",
        checks=(ENT + "entity.correct_hit_rate_pct",),
    ),
    Mutation(
        name="semantic-cache/c16-entity-key-drops-entities",
        claim="C16",
        kind="broken",
        what="the template/entity key is the template id alone: two prompts of one template share a key "
        "whatever their entities",
        edits=(
            Edit(
                ENTITY_KEYS,
                'return f"tpl_{self.template_id}_{hashlib.sha256(ents.encode()).hexdigest()[:16]}"',
                'return f"tpl_{self.template_id}"  # mutation: the entity set left out',
            ),
        ),
        run="semantic-cache/entity-keys",
        checks=(ENT + "entity.correct_hit_rate_pct",),
    ),
    Mutation(
        name="semantic-cache/c16-token-key-is-raw-hash",
        claim="C16",
        kind="stand-in",
        what="the token-level key hashes the raw prompt's bytes instead of the tokenizer's ids (no tokenizer)",
        edits=(
            Edit(
                ENTITY,
                '    return "hash_tok_" + hashlib.sha256(np.asarray(ids, dtype=np.int32).tobytes()).hexdigest()',
                '    return "hash_tok_" + hashlib.sha256(text.encode()).hexdigest()  # mutation',
            ),
        ),
        run="semantic-cache/entity-keys",
        checks=(ENT + "token.correct_hit_rate_pct",),
    ),
    # ---- I24 -----------------------------------------------------------------------------
    Mutation(
        name="semantic-cache/i24-onnx-is-torch-vs-ram",
        claim="I24",
        kind="broken",
        what="the 'ONNX' fast path (and its delayed twin) embeds with torch, judged against GPTCache with its "
        "SQLite file in RAM",
        edits=(
            Edit(
                GPTC,
                'fast, delayed = onnx.encode_one, onnx.with_delay(p["instrument_delay_ms"]).encode_one',
                'fast, delayed = emb.encode_one, _delayed(emb.encode_one, p["instrument_delay_ms"])  # mutation',
            ),
        ),
        run="semantic-cache/gptcache",
        checks=(GPT + "lookup.speedup_vs_gptcache_ram",),
    ),
    Mutation(
        name="semantic-cache/i24-gptcache-answers-off-by-one",
        claim="I24",
        kind="broken",
        what="GPTCache's data imported with an off-by-one: each inserted question stored with the next record's answer",
        edits=(
            Edit(
                GPTC,
                "        first.import_data([t for t, _ in wl.inserts], ins_labels)\n",
                "        first.import_data([t for t, _ in wl.inserts], ins_labels[1:] + ins_labels[:1])  # mutation\n",
            ),
        ),
        # its precision is left out (no hit at the threshold chosen for it), so only the recall is named
        run="semantic-cache/gptcache",
        checks=(GPT + "gptcache.recall_minus_nn_pp",),
    ),
    Mutation(
        name="semantic-cache/i24-test-pass-threshold-not-set",
        claim="I24",
        kind="broken",
        what="GPTCache's test pass never sets the chosen similarity_threshold: it runs at the calibration "
        "pass's 0, so every nearest entry is accepted",
        edits=(
            Edit(
                ACC,
                "        cache.set_threshold(t)\n        p = run_pass(cache, test_texts)\n",
                "        p = run_pass(cache, test_texts)  # mutation: the threshold left at 0\n",
            ),
        ),
        run="semantic-cache/gptcache",
        checks=(GPT + "gptcache.precision_minus_nn_pp",),
    ),
    Mutation(
        name="semantic-cache/i24-int8-is-fp32",
        claim="I24",
        kind="broken",
        what="the 'int8' arm loads the FP32 fused graph: the quantized file is built, never run",
        edits=(
            Edit(
                GPTC,
                'OnnxEmbedder.load(p["onnx_threads"], ctx.log, graph="int8")',
                'OnnxEmbedder.load(p["onnx_threads"], ctx.log, graph="fused")  # mutation',
            ),
        ),
        run="semantic-cache/gptcache",
        checks=(GPT + "int8.lookup.p50_ms", GPT + "int8.concurrent.speedup_vs_gptcache"),
    ),
    Mutation(
        name="semantic-cache/i24-int8-random-vectors",
        claim="I24",
        kind="broken",
        what="the 'int8' arm returns a random unit vector per text (seeded by the text): fast, and no model",
        edits=(
            Edit(
                GPTC,
                "    int8 = _int8_accuracy(q8, wl, cal, test, ours, p, ctx.log) if q8 is not None else None\n",
                "    if q8 is not None:  # mutation: a random unit vector per text in the int8 arm\n"
                "        def _rand(text, _d=q8.dim):\n"
                "            seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)\n"
                "            v = np.random.default_rng(seed).standard_normal(_d)\n"
                "            return (v / np.linalg.norm(v)).astype(np.float32)\n"
                "        q8.encode_one = _rand\n"
                "    int8 = _int8_accuracy(q8, wl, cal, test, ours, p, ctx.log) if q8 is not None else None\n",
            ),
        ),
        # no hit at FP32's threshold: its precision is left out, so only the recall is named
        run="semantic-cache/gptcache",
        checks=(GPT + "int8.recall_minus_fp32_pp",),
    ),
    Mutation(
        name="semantic-cache/i24-int8-noise-not-applied",
        claim="I24",
        kind="blinded",
        what="the agreement checks' instrument skips its known turn of the int8 query vectors",
        edits=(
            Edit(
                GPTC,
                '        perturbed(q, p["instrument_noise_cosine"], p["split_seed"] + 11), i8, ins_labels, wl, cal, test, same\n',
                (
                    "        q,\n"
                    "        i8,  # mutation: no turn\n"
                    "        ins_labels,\n"
                    "        wl,\n"
                    "        cal,\n"
                    "        test,\n"
                    "        same,\n"
                ),
            ),
        ),
        run="semantic-cache/gptcache",
        checks=(GPT + "int8.precision_minus_fp32_pp", GPT + "int8.recall_minus_fp32_pp"),
    ),
    # ---- C3 (judged on the lab: gpu A100) ------------------------------------------------
    Mutation(
        name="semantic-cache/c3-semantic-misses-not-stored",
        claim="C3",
        kind="broken",
        what="the semantic cache never stores the model's answer of a miss, so no later request can hit it "
        "(judged on the lab: the check needs an A100)",
        edits=(
            Edit(
                TTFT,
                "        store.put_signatures(np.array([sig], dtype=np.uint64), [new])\n",
                "        pass  # mutation: the miss's answer is not stored\n",
            ),
        ),
        run="semantic-cache/ttft",
        checks=("semantic-cache/ttft semantic_cache.p95_ms",),
    ),
    Mutation(
        name="semantic-cache/c3-hash-misses-not-stored",
        claim="C3",
        kind="broken",
        what="the hash cache never stores the model's answer of a miss, so a repeated prompt is served by the "
        "model again (judged on the lab: the check needs an A100)",
        edits=(
            Edit(
                TTFT,
                "        store.put_many([(key, new)])\n",
                "        pass  # mutation: the miss's answer is not stored\n",
            ),
        ),
        run="semantic-cache/ttft",
        checks=("semantic-cache/ttft hash_cache.p95_ms",),
    ),
    # ---- C4 (judged on the lab: gpu A100, memory measured on the GPU) --------------------
    Mutation(
        name="semantic-cache/c4-semantic-entries-never-inserted",
        claim="C4",
        kind="broken",
        what="the semantic-cache process never inserts the cached entries: it serves every request with the "
        "model, as no cache does (judged on the lab: the checks need a GPU)",
        edits=(
            Edit(
                PROBE,
                '            store.put_signatures(np.array(job["insert_sigs"], dtype=np.uint64), '
                "[e for _, e in inserts])\n",
                "            pass  # mutation: nothing inserted\n",
            ),
        ),
        run="semantic-cache/memory",
        checks=("semantic-cache/memory memory.gpu_change_pct", "semantic-cache/memory memory.rss_change_pct"),
    ),
    Mutation(
        name="semantic-cache/c4-known-allocation-never-made",
        claim="C4",
        kind="blinded",
        what="the instrument's process never makes its known extra allocation, so the probe cannot show that "
        "it sees memory (judged on the lab: the checks need a GPU)",
        edits=(
            Edit(
                PROBE,
                '        held = extra_allocation(job["extra_mb"], dev) if mode == "extra_allocation" else None\n',
                "        held = None  # mutation: the known allocation is never made\n",
            ),
        ),
        run="semantic-cache/memory",
        checks=("semantic-cache/memory memory.gpu_change_pct", "semantic-cache/memory memory.rss_change_pct"),
    ),
]
