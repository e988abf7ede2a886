"""Mutations judged by a shipped claim pack's ledger (run with `--pack`, the pack's setup under
the mutation's smaller --set): the GPTCache pack's checks on the semantic-cache suite's
gptcache case."""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

SUBJECT = "harness/experiments/semantic_cache/gptcache_subject.py"
SPEED = "harness/experiments/semantic_cache/gptcache_speed.py"
RUN = "semantic-cache/gptcache"
RIGHT = f"{RUN} gptcache.correct_hit_rate_pct"
ANSWERED = f"{RUN} gptcache.answered_pct"
TRAFFIC = f"{RUN} speed.traffic_vs_llm"
SMALL = (
    "gptcache.dataset_rows=200",
    "gptcache.latency_queries=4",
    "gptcache.llm_queries=3",
    "gptcache.llm_answer_tokens=16",
)

MUTATIONS: list[Mutation] = [
    Mutation(
        name="semantic-cache/gptcache-pack-counter-reads-the-clients-count",
        claim="G1",
        kind="dependent",
        what="GPTCache's own hit counter is read through the client's counting module (gptcache_accuracy): "
        "the second observer is no longer independent of what it checks",
        edits=(
            Edit(
                SUBJECT,
                "        return int(self._cache.report.hint_cache_count)\n",
                "        from harness.experiments.semantic_cache import gptcache_accuracy  # noqa: F401  (mutation)\n"
                "        return int(self._cache.report.hint_cache_count)\n",
            ),
        ),
        run=RUN,
        checks=(ANSWERED,),
        sets=SMALL,
        pack="gptcache",
        timeout_s=400,
    ),
    Mutation(
        name="semantic-cache/gptcache-pack-answers-imported-one-off",
        claim="G1",
        kind="broken",
        what="the cache is filled with every question's neighbour's answer: its hits are all wrong",
        edits=(
            Edit(
                SUBJECT,
                "        self._cache.import_data(questions, answers)\n",
                "        self._cache.import_data(questions, answers[1:] + answers[:1])  # mutation: answers shifted\n",
            ),
        ),
        run=RUN,
        checks=(RIGHT,),
        sets=SMALL,
        pack="gptcache",
        timeout_s=400,
    ),
    Mutation(
        name="semantic-cache/gptcache-pack-llm-wait-never-added",
        claim="G2",
        kind="blinded",
        what="the instrument's known wait is never added to the LLM call: the timing is not shown able to see a change",
        edits=(Edit(SPEED, "        time.sleep(wait_s)\n", "        pass  # mutation: the known wait dropped\n"),),
        run=RUN,
        checks=(TRAFFIC,),
        sets=SMALL,
        pack="gptcache",
        timeout_s=400,
    ),
    Mutation(
        name="semantic-cache/gptcache-pack-traffic-mean-forgets-misses",
        claim="G2",
        kind="broken",
        what="the traffic's mean time per request counts every request at the hit's time (the misses forgotten)",
        edits=(
            Edit(
                SPEED,
                '        mean = h * med["gptcache_hit"] + (1 - h) * med["control.empty_gptcache"]\n',
                '        mean = med["gptcache_hit"]  # mutation: the misses forgotten\n',
            ),
        ),
        run=RUN,
        checks=(TRAFFIC,),
        sets=SMALL,
        pack="gptcache",
        timeout_s=400,
        xfail_reason="a computed figure with no independent reference: with the misses forgotten the traffic's "
        "speed-up is one hit's (about 90x against a 64-token answer here, less with 16), still 'direction "
        "reproduced, magnitude differs', as the right figure (about 16x) is; the ledger cannot tell them apart",
    ),
]
