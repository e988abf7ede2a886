"""The claims ledger's model (harness/experiments/claims.yaml and claim packs' ledgers): the
fields a claim and its checks may have, the kinds of control, and the typed objects that the
runner stores with a run and the analysis reads back (`Claim`, `ClaimCheck`, `Control`,
`Reference`, `Condition`; each serialises and loads itself). The ledger is read and checked
against the suites by harness/model/ledger_parse.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from harness.model import identifiers
from harness.model.spec import compare, is_absence_bound
from harness.model.yaml_fields import stored_names, stored_number

# ---- the ledger's fields (harness/model/ledger_parse.py reads them) ---------------------------
LEDGER_FIELDS = {
    "id": (str, "C1, C2, ..."),
    "section": (str, "the source's section, quoted"),
    "text": (str, "the claim in words"),
    "checks": (list, "a list of checks {suite, case, metric, op+value or band, control, ...} that test the claim"),
    "figures": (dict, "the source's numbers that views show beside measurements: {name: number or list of numbers}"),
    "not_measurable": (str, "why this claim cannot be measured by the harness"),
    "not_measured": (str, "why this version does not measure the claim yet (it could be)"),
    "differs": (str, "what in the claim does not exist or differs from what is measured"),
}
CHECK_FIELDS = {
    "suite": (str, "suite name"),
    "case": (str, "case name"),
    "metric": (str, "metric name"),
    "op": (str, "one-sided claims ('at least', 'below'): one of < <= > >="),
    "value": (float, "the claimed number (with op)"),
    "band": (list, "two-sided claims ('~X', 'X -> Y'): [low, high] inside which the claim counts as reproduced"),
    "band_reason": (str, "why the band is this wide"),
    "direction": (
        dict,
        "{op, value}: the ordering or sign the claim implies; outside the band but in this "
        "direction is 'direction reproduced, magnitude differs'",
    ),
    "instrument": (
        (dict, list),
        "{metric, op, value | than [, factor], text} or a list of them: a condition "
        "where the effect is known to be there; the measurement must see it, else the "
        "verdict is inconclusive",
    ),
    "mechanism_off": (
        (dict, list),
        "{metric, op, value | than [, factor], text} or a list of them: the same "
        "workload with the mechanism removed; an effect that is seen must go away, else "
        "the verdict is 'not attributable'",
    ),
    "better": (
        str,
        "which side of the claim is better: higher or lower (an op check: the op's side; a band: past "
        "it on this side is 'exceeded'), or neither (a band only: past it on either side refutes it)",
    ),
    "observed": (
        str,
        "the independent observation the metric comes from (client histories against a read-back, "
        "server counters, the engine's /metrics, request timestamps), never the mechanism's own "
        "bookkeeping",
    ),
    "reference": (
        dict,
        "{metric, tolerance, text}: the same number computed independently in the same case; a "
        "difference over the tolerance (or the reference not measured) makes the check inconclusive",
    ),
    "no_instrument": (str, "why no instrument control can exist for this check"),
    "no_mechanism_off": (str, "why no mechanism-off control can exist for this check"),
    "stand_in": (
        (dict, list),
        "{metric, op, value | than [, factor], text} or a list of them: a cheaper stand-in "
        "for the named mechanism (a character hash for an embedding, plain LRU for LRU-K); the "
        "effect must exceed the stand-in's, else the verdict is 'not attributable'",
    ),
    "conditions": (
        dict,
        "what the claim needs, compared with what the run measured: {gpu: A100, redis_hosts: 6, "
        "loadgen_separate: true, clients: 200, ...} (case facts, the case's parameters, the "
        "manifest); a difference gives 'not comparable here'",
    ),
    "unit": (str, "unit of the claimed number"),
    "of": (
        str,
        "a check of an absence (op <= or <, value 0): the metric of the same case the count is out of "
        "(reads checked, writes acknowledged); not measured or 0 makes the check inconclusive",
    ),
    "exercised": (
        (dict, list),
        "{metric, op, value | than [, factor], text} or a list of them, on a check of an "
        "absence: a counter showing that the dangerous situation happened in the judged run "
        "(conflicts that reached the CAS, requests in flight across the swap) and its "
        "minimum; below it the check is inconclusive",
    ),
    "no_exercise": (str, "on a check of an absence: why no counter can show the situation happened"),
    "configured": (
        dict,
        "server configuration the check depends on, as the case read it back from the server "
        "(CONFIG GET, INFO, the engine's own settings) and recorded as facts: {fact: expected}; a "
        "mismatch or a fact not recorded makes the check inconclusive",
    ),
}
CONTROL_FIELDS = {
    "metric": (str, "the control's metric, measured in the same case"),
    "op": (str, "one of < <= > >="),
    "value": (float, "compare the control's metric with this number"),
    "than": (str, "or compare it with this other metric of the case (the mechanism on)"),
    "factor": (float, "with 'than': compare with factor x that metric (default 1)"),
    "text": (str, "what the control is, in words (e.g. 'prewarm off: first request on a fresh engine')"),
}
DIRECTION_FIELDS = {"op": (str, "one of < <= > >="), "value": (float, "the boundary, e.g. 0 for a sign")}
STAND_IN_FIELDS = {
    **CONTROL_FIELDS,
    "params": (
        dict,
        "the stand-in's strength, fixed here: {case parameter: value}; the case runs with these "
        "values (a spec, profile or --set that sets one is refused) and a run that used others is "
        "inconclusive",
    ),
    "no_params": (str, "why the stand-in has no strength to fix (plain LRU at the same capacity)"),
    "instrument": (
        dict,
        "{metric, op, value | than [, factor], text}: the stand-in's own instrument, showing it "
        "does what it is said to do; not held makes the check inconclusive",
    ),
    "no_instrument": (str, "why the stand-in can have no instrument of its own"),
}
REFERENCE_FIELDS = {
    "metric": (str, "the reference's metric, measured in the same case by independent code"),
    "tolerance": (float, "the largest difference |metric - reference| that still agrees, in the check's unit"),
    "text": (str, "what the reference is, in words"),
    "module": (str, "the module that computes the reference (harness.experiments.kv_trace.recount)"),
    "independent_of": (
        list,
        "the modules or packages that compute the checked number: the reference module may not "
        "import any of them, directly or through what it imports (a test of the import graph "
        "and the run both check it)",
    ),
    "not_code": (str, "instead of module: why the reference is not code of this project (a server's own counters)"),
}
BETTER = ("higher", "lower")
NEITHER = "neither"  # a band only: a claimed point where no side is better (a formula's value, an agreement)


@dataclass
class Condition:
    op: str
    value: float

    def holds(self, measured: float) -> bool:
        return compare(self.op, measured, self.value)

    def to_json(self) -> dict:
        return {"op": self.op, "value": self.value}


INSTRUMENT = "instrument"
MECHANISM_OFF = "mechanism_off"
STAND_IN = "stand_in"
EXERCISE = "exercised"  # evidence that the dangerous situation happened (a check of an absence)
CONTROL_KINDS = (INSTRUMENT, MECHANISM_OFF, STAND_IN, EXERCISE)
CONTROL_LABELS = {INSTRUMENT: "instrument", MECHANISM_OFF: "mechanism off", STAND_IN: "stand-in", EXERCISE: "exercise"}


@dataclass
class Reference:
    """An independent computation of a check's number in the same case: the check's metric must
    agree with it within the tolerance, else the instrument disagrees with its reference."""

    metric: str
    tolerance: float
    text: str
    module: str = ""  # the module computing the reference
    independent_of: tuple[str, ...] = ()  # the modules computing the checked number: never imported by `module`
    not_code: str = ""  # instead of module: why the reference is not this project's code

    def agrees(self, measured: float, reference: float) -> bool:
        return abs(measured - reference) <= self.tolerance

    def independence(self) -> str:
        """How the reference's independence is enforced, in words."""
        if self.module:
            return (
                f"{self.module} imports none of {', '.join(self.independent_of)} (the import graph, checked by a "
                f"test and by every run)"
            )
        return f"not code of this project: {self.not_code}" if self.not_code else "not stated"

    def to_json(self) -> dict:
        out = {"metric": self.metric, "tolerance": self.tolerance, "text": self.text}
        if self.module:
            out["module"], out["independent_of"] = self.module, list(self.independent_of)
        if self.not_code:
            out["not_code"] = self.not_code
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Reference":
        deps = d.get("independent_of")
        (metric,) = stored_names(d, "metric")
        return cls(
            metric,
            stored_number("reference", d.get("tolerance")),
            str(d.get("text", "")),
            str(d.get("module") or ""),
            tuple(str(x) for x in deps) if isinstance(deps, list) else (),
            str(d.get("not_code") or ""),
        )


@dataclass
class Control:
    """One control of a claim check. An instrument control (positive) is a condition where the
    effect is known to be there: the measurement must see it. A mechanism-off control
    (negative) is the same workload with the mechanism removed: an effect that is seen must go
    away with it. A stand-in control is the same workload with a cheaper stand-in in the named
    mechanism's place: the effect must exceed the stand-in's to be attributed to the mechanism."""

    metric: str
    op: str
    text: str
    value: float | None = None
    than: str | None = None
    factor: float = 1.0
    kind: str = INSTRUMENT
    params: dict = field(default_factory=dict)  # a stand-in's strength, fixed by the ledger
    instrument: "Control | None" = None  # a stand-in's own instrument
    no_params: str = ""
    no_instrument: str = ""

    def __post_init__(self):
        if self.kind not in CONTROL_KINDS:
            raise ValueError(f"a control's kind is one of {CONTROL_KINDS}, not {self.kind!r}")

    @property
    def label(self) -> str:
        return CONTROL_LABELS[self.kind]

    def describe(self) -> str:
        rhs = f"{self.factor:g} x {self.than}" if self.than and self.factor != 1 else (self.than or f"{self.value:g}")
        return f"{self.metric} {self.op} {rhs}"

    def to_json(self) -> dict:
        out: dict[str, Any] = {"metric": self.metric, "op": self.op, "text": self.text, "kind": self.kind}
        if self.value is not None:
            out["value"] = self.value
        if self.than is not None:
            out["than"] = self.than
            out["factor"] = self.factor
        if self.params:
            out["params"] = self.params
        if self.instrument is not None:
            out["instrument"] = self.instrument.to_json()
        for key in ("no_params", "no_instrument"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_json(cls, d: dict, kind: str = INSTRUMENT) -> "Control":
        own = d.get("instrument")
        params = d.get("params")
        (metric,) = stored_names(d, "metric")
        return cls(
            metric,
            d["op"],
            d.get("text", ""),
            d.get("value"),
            d.get("than"),
            float(d.get("factor", 1.0)),
            d.get("kind", kind),
            dict(params) if isinstance(params, dict) else {},
            cls.from_json(own, INSTRUMENT) if isinstance(own, dict) else None,
            str(d.get("no_params") or ""),
            str(d.get("no_instrument") or ""),
        )


@dataclass
class ClaimCheck:
    suite: str
    case: str
    metric: str
    op: str | None = None
    value: float | None = None
    unit: str = ""
    band: tuple[float, float] | None = None
    band_reason: str = ""
    direction: Condition | None = None
    controls: list[Control] = field(default_factory=list)
    conditions: dict = field(default_factory=dict)
    better: str = ""  # "higher" or "lower": which side of the claim is better ("" in results before issue 39)
    observed: str = ""  # the independent observation the metric comes from
    reference: Reference | None = None  # the same number computed independently
    no_instrument: str = ""  # why no instrument control can exist
    no_mechanism_off: str = ""  # why no mechanism-off control can exist
    of: str | None = None  # a check of an absence: the metric its count is out of
    no_exercise: str = ""  # a check of an absence: why no counter can show the situation happened
    configured: dict = field(default_factory=dict)  # server configuration read back: {fact: expected}

    @property
    def judges_an_absence(self) -> bool:
        """0 lost, 0 failed, 0 mixed: a check that passes when nothing happened."""
        return self.band is None and is_absence_bound(self.op, self.value)

    @property
    def exercises(self) -> list[Control]:
        return [c for c in self.controls if c.kind == EXERCISE]

    @property
    def instruments(self) -> list[Control]:
        return [c for c in self.controls if c.kind == INSTRUMENT]

    @property
    def mechanism_off(self) -> list[Control]:
        return [c for c in self.controls if c.kind == MECHANISM_OFF]

    @property
    def stand_ins(self) -> list[Control]:
        return [c for c in self.controls if c.kind == STAND_IN]

    def past_claim(self, measured: float) -> bool:
        """A band check's value past the band on its better side (the verdict 'exceeded')."""
        if self.band is None or self.better not in BETTER:
            return False
        return measured > self.band[1] if self.better == "higher" else measured < self.band[0]

    @property
    def control(self) -> Control | None:
        """The first control (instrument first), for views that show one."""
        first = self.instruments + self.mechanism_off
        return first[0] if first else None

    def in_claim(self, measured: float) -> bool:
        if self.band is not None:
            return self.band[0] <= measured <= self.band[1]
        return compare(cast(str, self.op), measured, cast(float, self.value))  # no band: op and value are given

    def describe(self) -> str:
        if self.band is not None:
            return f"{self.metric} in [{self.band[0]:g}, {self.band[1]:g}] {self.unit}".strip()
        of = f" of {self.of}" if self.of else ""
        return f"{self.metric} {self.op} {self.value:g} {self.unit}".strip() + of

    def to_json(self) -> dict:
        out: dict = {"suite": self.suite, "case": self.case, "metric": self.metric, "unit": self.unit}
        if self.band is not None:
            out["band"] = list(self.band)
            out["band_reason"] = self.band_reason
        else:
            out["op"], out["value"] = self.op, self.value
        if self.direction is not None:
            out["direction"] = self.direction.to_json()
        out["controls"] = [c.to_json() for c in self.controls]
        if self.conditions:
            out["conditions"] = self.conditions
        if self.reference is not None:
            out["reference"] = self.reference.to_json()
        for key in ("better", "observed", "no_instrument", "no_mechanism_off", "of", "no_exercise", "configured"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_json(cls, d: dict) -> "ClaimCheck":
        """Also reads the format before controls had kinds: its one `control` was judged first
        (not held -> inconclusive), which is what an instrument control does."""
        band = d.get("band")
        direction = d.get("direction")
        controls = [Control.from_json(c) for c in d.get("controls") or []]
        for kind in CONTROL_KINDS:  # the ledger's own spelling
            raw = d.get(kind)
            controls += [Control.from_json(c, kind) for c in ([raw] if isinstance(raw, dict) else raw or [])]
        if not controls and d.get("control"):
            controls = [Control.from_json(d["control"], INSTRUMENT)]
        ref = d.get("reference")
        suite, case, metric = stored_names(d, "suite", "case", "metric")
        return cls(
            suite,
            case,
            metric,
            d.get("op"),
            d.get("value"),
            d.get("unit", ""),
            tuple(band) if band else None,
            d.get("band_reason", ""),
            Condition(direction["op"], float(direction["value"])) if direction else None,
            controls,
            dict(d.get("conditions") or {}),
            str(d.get("better") or ""),
            str(d.get("observed") or ""),
            Reference.from_json(ref) if isinstance(ref, dict) else None,
            str(d.get("no_instrument") or ""),
            str(d.get("no_mechanism_off") or ""),
            stored_names(d, "of")[0] if d.get("of") is not None else None,
            str(d.get("no_exercise") or ""),
            dict(d["configured"]) if isinstance(d.get("configured"), dict) else {},
        )


@dataclass
class Claim:
    id: str
    section: str
    text: str
    checks: list[ClaimCheck]
    not_measurable: str = ""
    differs: str = ""
    not_measured: str = ""
    figures: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "section": self.section,
            "text": self.text,
            "not_measurable": self.not_measurable,
            "differs": self.differs,
            "not_measured": self.not_measured,
            "figures": self.figures,
            "checks": [c.to_json() for c in self.checks],
        }

    @classmethod
    def from_json(cls, d: dict) -> "Claim":
        if not isinstance(d["id"], str):  # an edited results.json: the id keys boards and comparisons
            raise TypeError(f"a claim's id is a {type(d['id']).__name__}, not text")
        return cls(
            d["id"],
            str(d.get("section", "")),
            d.get("text", ""),
            [ClaimCheck.from_json(c) for c in d.get("checks", [])],
            d.get("not_measurable", ""),
            d.get("differs", ""),
            d.get("not_measured", ""),
            dict(d.get("figures") or {}),
        )

    @property
    def order(self) -> tuple:
        """C2 before C10 (harness.model.identifiers.id_order: ASCII digits, never raises)."""
        return identifiers.id_order(self.id)


def claim_figure(claims: list[Claim], claim_id: str, name: str):
    """A claimed number (or list of numbers) from the ledger's `figures`; None when absent."""
    for c in claims:
        if c.id == claim_id:
            return c.figures.get(name)
    return None
