"""The prompt-cas suite's view: each update rule's counts, aggregated across repetitions."""

from __future__ import annotations

from harness.experiments.prompt_cas.series import RULES
from harness.experiments.views import ViewContext, series_table, view

WHAT = {
    "plain": "no CAS, three HSETs (control: mix-ups from non-atomic writes)",
    "atomic": "no CAS, one HSET (control: lost updates from missing CAS, no mix-ups)",
    "as-written": "the source's dominance rule, the client sending the vector it read",
    "incremented": "the same rule, the client's own counter incremented first",
    "equal": "classic CAS: stored vector equal to the one read",
}


@view("prompt-cas")
def prompt_cas(ctx: ViewContext) -> list:
    blocks = []
    for case in ctx.case_names():
        rule = RULES["rule"]
        rules = ctx.aggregate(case, RULES, key=rule)
        if rules is None:
            continue
        rules.columns["what"] = [WHAT.get(r, "") for r in rules.column(rule)]
        order = [rule, "what"] + [c for c in rules.columns if c not in (rule, "what")]
        rules = rules.select(order)
        blocks.append(
            series_table(
                rules,
                "Prompt/response updates under each rule (median over repetitions, min-max)",
                case,
                note=f"{rules.note}; the rules' order rotates by one per repetition. A mix-up is a response that is "
                "not its prompt's partner or not what the writer of its write id sent (reads on primaries, replica "
                "reads with READONLY); lost updates are writes told applied that the final read-back does not "
                "contain; told_applied and vv_lost_updates are the mechanism's own replies and vectors, shown only.",
            )
        )
    return blocks
