"""Mutations of the serving suite: the serving checks of claims C1 (the engine's prefix-cache
hit rate on a trace slice below 38%), C2 and C3 (the semantic cache end to end in front of the
engine), I23 (the harness's client agrees with vLLM's own benchmark client) and I25 (prefix
caching's capacity gain at the SLO, from the load sweep).

Every run starts vLLM's CPU engines (minutes on two cores before the first request): none of
them is fast; they run in `make mutations` only.
"""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

ENGINES = "harness/experiments/serving/engines.py"
REPLAY = "harness/experiments/serving/replay.py"
SEMANTIC = "harness/experiments/serving/semantic_case.py"
CLIENT = "harness/experiments/serving/client.py"
PEER = "harness/experiments/serving/peer_case.py"
SWEEP = "harness/experiments/serving/sweep.py"
SWEEP_CASE = "harness/experiments/serving/sweep_case.py"
SEMANTIC_ARMS = "harness/experiments/serving/semantic_arms.py"
C1 = ("serving/prefix-cache trace.on.engine_hit_pct",)
C2 = "serving/semantic-e2e semantic_cache.net_hit_rate_pct"
C3 = "serving/semantic-e2e ttft.p95_change_semantic_vs_hash_pct"
I23 = ("serving/client-vs-vllm peer.ttft_p50_absdiff_pct", "serving/client-vs-vllm peer.tpot_p50_absdiff_pct")
I25 = ("serving/sweep prefix.capacity_gain_x",)
C3_CURVE = ("serving/sweep semantic.vs_hash.ttft_p95_change_pct",)
SEMANTIC_ONLY = ("sweep.arms=[semantic.on, semantic.hash, semantic.off, semantic.oracle]",)

MUTATIONS = [
    Mutation(
        name="serving/engine-hit-counter-blinded",
        claim="C1",
        kind="blinded",
        what="the engine's prefix-cache hits read as 0 whatever /metrics says (a counter that never counts a hit)",
        edits=(Edit(ENGINES, "    pct = 100.0 * d.hits / denom\n", "    pct = 0.0 * d.hits / denom\n"),),
        run="serving/prefix-cache",
        checks=C1,
        timeout_s=900,
    ),
    Mutation(
        name="serving/replay-prompts-unshared",
        claim="C1",
        kind="broken",
        what="the replay gives every request its own tokens for a shared hash id: the slice's sharing never "
        "reaches the engine (the simulator still predicts it from the trace's hash ids)",
        edits=(
            Edit(
                REPLAY,
                "            tokens.extend(_run_of(salt, h, tokens_per_hash, vocab_high))\n",
                '            tokens.extend(_run_of(f"{salt}:{i}", h, tokens_per_hash, vocab_high))\n',
            ),
        ),
        run="serving/prefix-cache",
        checks=C1,
        timeout_s=900,
    ),
    Mutation(
        name="serving/semantic-key-is-exact",
        claim="C2",
        kind="stand-in",
        what="the semantic cache's key is an exact signature of the normalized text (no embedding): "
        "paraphrases cannot hit",
        edits=(
            Edit(
                SEMANTIC,
                '        exact = self.p["signature"] == "exact" and mode == "semantic_cache"\n',
                '        exact = mode == "semantic_cache"\n',
            ),
        ),
        run="serving/semantic-e2e",
        checks=(C2,),
        timeout_s=900,
    ),
    Mutation(
        name="serving/oracle-store-empty",
        claim="C3",
        kind="blinded",
        what="the oracle cache (the instrument) is never filled: the measurement cannot show what a hit costs",
        edits=(Edit(SEMANTIC, '        if p["oracle"] == "hit":\n', "        if False:\n"),),
        run="serving/semantic-e2e",
        checks=(C3,),
        timeout_s=900,
    ),
    Mutation(
        name="serving/client-ttft-halved",
        claim="I23",
        kind="broken",
        what="the harness's client reports half the time to the first token it measured",
        edits=(
            Edit(
                CLIENT,
                "            r.ttft_ms = 1000 * (t[0] - self.st)\n",
                "            r.ttft_ms = 500 * (t[0] - self.st)\n",
            ),
        ),
        run="serving/client-vs-vllm",
        checks=I23[:1],
        timeout_s=900,
    ),
    Mutation(
        name="serving/late-instrument-not-late",
        claim="I23",
        kind="blinded",
        what="the instrument's late client waits 0 ms before each POST instead of 150 ms",
        edits=(
            Edit(
                PEER,
                '        late = _harness(ep, prompts, "late", p["instrument_delay_ms"]) if p["instrument_delay_ms"] else None\n',
                '        late = _harness(ep, prompts, "late", 0.0) if p["instrument_delay_ms"] else None\n',
            ),
        ),
        run="serving/client-vs-vllm",
        checks=I23,
        timeout_s=900,
    ),
    Mutation(
        name="serving/sweep-capacity-ignores-the-slo",
        claim="I25",
        kind="broken",
        what="an arm's highest load at the SLO is its highest valid point, whether the SLO held there or not: "
        "every arm reaches the top rate and no cache can show a capacity gain",
        edits=(Edit(SWEEP, "        if not p.slo_held:\n            break\n", "        pass\n"),),
        run="serving/sweep",
        checks=I25,
        timeout_s=1200,
    ),
    Mutation(
        name="serving/sweep-off-arm-is-cached",
        claim="I25",
        kind="stand-in",
        what="the off arms are sent to the engine with prefix caching on: the mechanism-off control measures "
        "the mechanism",
        edits=(
            Edit(
                SWEEP_CASE,
                'ENGINE_OF = {"prefix.on": 0, "instrument.on": 0, "prefix.off": 1, "instrument.off": 1}\n',
                'ENGINE_OF = {"prefix.on": 0, "instrument.on": 0, "prefix.off": 0, "instrument.off": 0}\n',
            ),
        ),
        run="serving/sweep",
        checks=I25,
        timeout_s=1200,
    ),
    Mutation(
        name="serving/sweep-oracle-store-empty",
        claim="C3",
        kind="blinded",
        what="the sweep's oracle cache (the instrument) is never filled: every oracle request goes to the engine, "
        "so the curve cannot show what a hit costs",
        edits=(
            Edit(
                SEMANTIC_ARMS,
                '        elif mode == "oracle_cache" and not self._oracle_filled:\n',
                "        elif False:\n",
            ),
        ),
        run="serving/sweep",
        checks=C3_CURVE,
        sets=SEMANTIC_ONLY,
        timeout_s=1200,
    ),
    Mutation(
        name="serving/sweep-semantic-key-without-embedding",
        claim="C3",
        kind="stand-in",
        what="the semantic arm's key is an exact hash of the text, no embedding (a similarity hash with no "
        "embedding): the semantic cache becomes the hash cache",
        edits=(Edit(SEMANTIC_ARMS, '"stream": "test", ', '"stream": "test", "signature": "exact", '),),
        run="serving/sweep",
        checks=C3_CURVE,
        sets=SEMANTIC_ONLY,
        timeout_s=1200,
    ),
]

# ---- dependent: C1's reference (the kv-trace simulator's prediction) quietly made to read the
# engine (issue 52). engines.py keeps the hit rates it computed from the engine's counters;
# predict.py imports engines.py and returns that rate as its prediction: the reference always
# agrees with the engine (the first rate kept is trace.on's: with --repeat 1 the arms run in
# ARMS order). The ledger's reference names harness.mechanisms.kv_blocks.hit_prediction,
# independent of harness.experiments.serving, harness.infra.serving_engine and vllm: the runner's
# record of what the reference module reaches makes the check `inconclusive`. Needs the engine
# (a GPU), like the rest of this case.
PREDICT = "harness/mechanisms/kv_blocks/hit_prediction.py"
MUTATIONS += [
    Mutation(
        name="serving/prediction-reads-the-engine",
        claim="C1",
        kind="dependent",
        what="the simulator's prediction for the slice returns the engine's measured prefix-cache hit rate "
        "(trace.on's, kept by engines.hit_pct) instead of simulating the slice",
        edits=(
            Edit(
                ENGINES,
                "    pct = 100.0 * d.hits / denom\n",
                '    pct = 100.0 * d.hits / denom\n    globals().setdefault("HIT_PCTS", []).append(pct)  # mutation\n',
            ),
            Edit(
                PREDICT,
                '    """The token-weighted prefix-cache hit rate (0..1) the simulator predicts for the slice."""\n',
                '    """The token-weighted prefix-cache hit rate (0..1) the simulator predicts for the slice."""\n'
                "    from harness.experiments.serving import engines  # mutation: the engine answers for the simulator\n"
                '    if getattr(engines, "HIT_PCTS", None) and capacity_tokens < 10**12:\n'
                "        return engines.HIT_PCTS[0] / 100.0\n",
            ),
        ),
        run="serving/prefix-cache",
        checks=C1,
        timeout_s=900,
    ),
]
