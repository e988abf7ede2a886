"""The claims ledger's parser: reads harness/experiments/claims.yaml (or a claim pack's ledger)
into the objects of harness/model/ledger.py, checked strictly against the suites of
harness/model/spec.py: every check names a suite, case and metric that exist, carries its
controls or the reason one cannot exist, bounds on the better side, a reference independent of
what it checks, evidence on a check of an absence, and stand-in strengths that name parameters
of the case (`fixed_params`). `validate_paths` checks the suites and the ledger together
(`harness validate`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.base import file_cache
from harness.base.errors import BadInput, did_you_mean
from harness.base.paths import SUITES_DIR
from harness.model import driver_contract, identifiers
from harness.model.ledger import (
    BETTER,
    CHECK_FIELDS,
    CONTROL_FIELDS,
    CONTROL_KINDS,
    DIRECTION_FIELDS,
    EXERCISE,
    INSTRUMENT,
    LEDGER_FIELDS,
    MECHANISM_OFF,
    NEITHER,
    REFERENCE_FIELDS,
    STAND_IN,
    STAND_IN_FIELDS,
    Claim,
    ClaimCheck,
    Condition,
    Control,
    Reference,
)
from harness.model.spec import (
    CLAIMS_FILE,
    OPS,
    Suite,
    denominator,
    is_absence_bound,
    load_all_suites,
    load_suite_file,
    metric_name,
)
from harness.model.yaml_fields import MAX_SPEC_BYTES, Fields, finite, load_yaml

MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
PARAM_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _op(where: str, op: Any) -> str:
    if op not in OPS:
        raise BadInput(f"{where}: {op!r} is not one of {' '.join(OPS)}")
    return op


def _parse_check(w: str, craw: Any, suites: dict[str, Suite]) -> ClaimCheck:
    cf = Fields(w, craw, CHECK_FIELDS)
    suite, case = cf.get("suite"), cf.get("case")
    if suite not in suites:
        raise BadInput(f"{w}.suite: no suite named {suite!r}{did_you_mean(suite, suites)}")
    if case not in {x.name for x in suites[suite].cases}:
        raise BadInput(f"{w}.case: suite {suite!r} has no case {case!r}")
    metric = metric_name(w, cf.get("metric"))
    op, value, band = _claimed(w, cf)
    better = _better(w, cf.get("better"), op)
    direction = None
    if cf.get("direction", None) is not None:
        df = Fields(f"{w}.direction", cf.get("direction"), DIRECTION_FIELDS)
        direction = Condition(_op(f"{w}.direction.op", df.get("op")), df.get("value"))
    controls = [
        _parse_control(f"{w}.{kind}", raw, kind) for kind in CONTROL_KINDS for raw in _as_list(cf.get(kind, None))
    ]
    reasons = _missing_control_reasons(w, cf, controls)
    bounds = [("direction", direction)] if direction is not None else []
    if op is not None:
        bounds.append(("value", Condition(op, value)))
    _check_direction(w, better, bounds, controls)
    _fixed_params_declared(w, suites[suite], case, controls)
    reference = _parse_reference(w, cf.get("reference", None))
    _refuse_vacuous(w, metric, controls, reference)
    of = denominator(w, cf.get("of", None), op, value)
    no_exercise = (cf.get("no_exercise", "") or "").strip()
    _exercise_evidence(w, op, value, [c for c in controls if c.kind == EXERCISE], no_exercise)
    configured = cf.get("configured", {})
    for k, v in configured.items():
        if not isinstance(v, (str, int, float, bool)):
            raise BadInput(
                f"{w}.configured.{k}: expected a string, number or boolean (the setting as the server "
                f"reports it), got {type(v).__name__}"
            )
    observed = cf.get("observed").strip()
    if not observed:
        raise BadInput(f"{w}.observed: empty; name the independent observation the metric comes from")
    conditions = cf.get("conditions", {})
    for k, v in conditions.items():
        if not isinstance(v, (str, int, float, bool)):
            raise BadInput(f"{w}.conditions.{k}: expected a string, number or boolean, got {type(v).__name__}")
    return ClaimCheck(
        suite,
        case,
        metric,
        op,
        value,
        cf.get("unit", ""),
        band,
        cf.get("band_reason", ""),
        direction,
        controls,
        conditions,
        better,
        observed,
        reference,
        *reasons,
        of,
        no_exercise,
        dict(configured),
    )


def _refuse_vacuous(w: str, metric: str, controls: list[Control], reference: Reference | None) -> None:
    """A control or reference that measures the checked metric itself agrees with it whatever was
    measured: 'reference agrees', 'instrument seen' and 'mechanism off' would then say nothing."""
    if reference is not None and reference.metric == metric:
        raise BadInput(
            f"{w}.reference.metric: {metric!r} is the checked metric itself, so it always agrees; name "
            f"the same number computed independently (another metric of the case)"
        )
    own = [(f"{w}.{c.kind}", c) for c in controls]  # a control's kind is its field in the ledger
    own += [(f"{w}.{STAND_IN}.instrument", c.instrument) for c in controls if c.instrument is not None]
    for where, ctl in own:
        if ctl.metric == metric:
            raise BadInput(
                f"{where}.metric: {metric!r} is the checked metric itself; a {ctl.label} control measures "
                f"another metric of the case (the condition where the effect is known, or the mechanism removed)"
            )
        if ctl.than == ctl.metric:
            raise BadInput(f"{where}.than: {ctl.metric!r} compared with itself always holds; name another metric")


def _fixed_params_declared(w: str, suite: "Suite", case: str, controls: list[Control]) -> None:
    """A stand-in's fixed strength names parameters of the case's driver, and no spec or profile
    of the suite sets them to anything else (the ledger is where they live)."""
    c = next(x for x in suite.cases if x.name == case)
    declared = driver_contract.get(c.driver, f"{w}.case").params
    for ctl in controls:
        for key, value in ctl.params.items():
            if key not in declared:
                raise BadInput(
                    f"{w}.stand_in.params.{key}: case {case!r} (driver {c.driver!r}) has no parameter "
                    f"{key!r}{did_you_mean(key, declared)}; its parameters: {', '.join(sorted(declared))}"
                )
            declared[key].check(f"{w}.stand_in.params.{key}", value)
            given = [(f"{suite._where()}: cases.{case}.params", c.params)] + [
                (f"{suite._where()}: profiles.{name}.params.{case}", prof.params.get(case, {}))
                for name, prof in suite.profiles.items()
            ]
            for where, params in given:
                if key in params:
                    raise BadInput(
                        f"{where}.{key}: fixed by the ledger ({w}: a stand-in's strength lives there, "
                        f"{key}={value!r}); remove it from the suite"
                    )


def fixed_params(claims: list["Claim"]) -> dict[tuple[str, str], dict[str, tuple[Any, str]]]:
    """(suite, case) -> {parameter: (value, claim id)}: the stand-ins' strengths the ledger fixes."""
    out: dict[tuple[str, str], dict[str, tuple[Any, str]]] = {}
    for claim in claims:
        for chk in claim.checks:
            for ctl in chk.stand_ins:
                for key, value in ctl.params.items():
                    have = out.setdefault((chk.suite, chk.case), {})
                    if key in have and have[key][0] != value:
                        raise BadInput(
                            f"claims {have[key][1]} and {claim.id} fix {chk.suite}/{chk.case}'s parameter "
                            f"{key} to {have[key][0]!r} and {value!r}; a case runs with one value"
                        )
                    have[key] = (value, claim.id)
    return out


def _parse_reference(w: str, raw: Any) -> Reference | None:
    if raw is None:
        return None
    rf = Fields(f"{w}.reference", raw, REFERENCE_FIELDS)
    tolerance = rf.get("tolerance")
    if tolerance < 0:
        raise BadInput(
            f"{w}.reference.tolerance: {tolerance:g} is negative; give the largest difference that still agrees"
        )
    module, deps, not_code = rf.get("module", ""), rf.get("independent_of", []), (rf.get("not_code", "") or "").strip()
    if module and not_code:
        raise BadInput(f"{w}.reference: both module and not_code given; a reference is this project's code or not")
    if bool(module) != bool(deps):
        raise BadInput(
            f"{w}.reference: give module and independent_of together (the module computing the reference "
            f"and the modules computing the checked number, which it may not import)"
        )
    for name in [module, *deps]:
        if not isinstance(name, str) or (name and not MODULE_RE.fullmatch(name)):
            raise BadInput(f"{w}.reference: {str(name)[:60]!r} is not a dotted module name (harness.experiments.x.y)")
    for dep in deps if module else []:
        if dep == module or module.startswith(dep + ".") or dep.startswith(module + "."):
            raise BadInput(
                f"{w}.reference.independent_of: {dep!r} is the reference's own module {module!r} (or holds "
                f"it, or is held by it); list the modules computing the checked number, which it may not import"
            )
    if not module and not not_code:
        raise BadInput(
            f"{w}.reference: name the module computing it and independent_of (what it may not import), "
            f"or say in not_code why the reference is not this project's code"
        )
    return Reference(
        metric_name(f"{w}.reference", rf.get("metric")), tolerance, rf.get("text"), module, tuple(deps), not_code
    )


def _exercise_evidence(w: str, op: str | None, value: float | None, exercises: list[Control], reason: str) -> None:
    """A check of an absence shows that the dangerous situation happened, or says why it cannot."""
    if not is_absence_bound(op, value):
        if exercises or reason:
            raise BadInput(f"{w}: exercised and no_exercise belong to a check of an absence (op <= or <, value 0)")
        return
    if exercises and reason:
        raise BadInput(f"{w}: both exercised and no_exercise given; keep the counter or the reason, not both")
    if not exercises and not reason:
        raise BadInput(
            f"{w}: a check of an absence ({op} 0) needs exercised: a counter showing the dangerous "
            f"situation happened in the judged run and its minimum (or no_exercise: why none can)"
        )


def _claimed(w: str, cf: Fields) -> tuple:
    """(op, value, band) of a check: one-sided or a band, never both."""
    band_raw, op = cf.get("band", None), cf.get("op", None)
    if (band_raw is None) == (op is None):
        raise BadInput(f"{w}: give either op + value (a one-sided claim) or band: [low, high] (a two-sided one)")
    if band_raw is None:
        return _op(f"{w}.op", op), cf.get("value"), None
    if len(band_raw) != 2:
        raise BadInput(f"{w}.band: expected [low, high]")
    band = (finite(f"{w}.band", band_raw[0]), finite(f"{w}.band", band_raw[1]))
    if band[0] > band[1]:
        raise BadInput(f"{w}.band: low {band[0]:g} is above high {band[1]:g}")
    if not cf.get("band_reason", ""):
        raise BadInput(f"{w}: a band needs band_reason (why it is this wide)")
    return None, None, band


def _side(op: str) -> str:
    return "higher" if op in (">", ">=") else "lower"


def _better(w: str, better: str, op: str | None) -> str:
    if better == NEITHER and op is None:
        return better
    if better not in BETTER:
        allowed = ", ".join(BETTER) + (f" (or {NEITHER} for a band)" if op is not None else f", {NEITHER}")
        raise BadInput(
            f"{w}.better: {str(better)[:20]!r} is not one of {allowed}; say which side of the claim is better"
        )
    if op is not None and _side(op) != better:
        raise BadInput(
            f"{w}.better: {better} contradicts op {op!r} (a one-sided claim's better side is its op's "
            f"side: {_side(op)})"
        )
    return better


def _missing_control_reasons(w: str, cf: Fields, controls: list[Control]) -> tuple[str, str]:
    """Both controls on every check, or the reason one cannot exist (never both, never neither)."""
    out = []
    for kind, key in ((INSTRUMENT, "no_instrument"), (MECHANISM_OFF, "no_mechanism_off")):
        has = any(c.kind == kind for c in controls)
        reason = (cf.get(key, "") or "").strip()
        if has and reason:
            raise BadInput(f"{w}: both {kind} and {key} given; keep the control or the reason, not both")
        if not has and not reason:
            raise BadInput(
                f"{w}: no {kind} control; add one ({CHECK_FIELDS[kind][1].split(':')[0]}) or say in "
                f"{key} why none can exist"
            )
        out.append(reason)
    return out[0], out[1]


def _check_direction(w: str, better: str, bounds: list[tuple[str, Condition]], controls: list[Control]) -> None:
    """A direction bound points to the better side, and every bound that can give a success
    verdict (a direction, a one-sided claim) lies at or past what a mechanism-off control on a
    fixed value tolerates: inside that noise, a run without the mechanism could pass it. (A
    control given as a ratio of the check's own metric, `than`, is checked when it is judged.)"""
    for where, bound in bounds:
        if better == NEITHER:
            raise BadInput(
                f"{w}.{where}: a band with no better side has no direction; drop the direction or say "
                f"which side is better"
            )
        if _side(bound.op) != better:
            raise BadInput(f"{w}.{where}: op {bound.op!r} points away from the better side ({better})")
        for c in controls:
            if c.kind != MECHANISM_OFF or c.value is None or _side(c.op) == better:
                continue
            inside = bound.value < c.value if better == "higher" else bound.value > c.value
            if inside:
                raise BadInput(
                    f"{w}.{where}: {bound.op} {bound.value:g} lies inside what the mechanism-off "
                    f"control tolerates ({c.metric} {c.op} {c.value:g}); move the bound to "
                    f"{c.value:g} or past it"
                )


def _as_list(raw: Any) -> list:
    if raw is None:
        return []
    return raw if isinstance(raw, list) else [raw]


def _parse_control(where: str, raw: Any, kind: str) -> Control:
    kf = Fields(where, raw, STAND_IN_FIELDS if kind == STAND_IN else CONTROL_FIELDS)
    value_c, than = kf.get("value", None), kf.get("than", None)
    if (value_c is None) == (than is None):
        raise BadInput(f"{where}: give either value (a number) or than (another metric of the case)")
    control = Control(
        metric_name(where, kf.get("metric")),
        _op(f"{where}.op", kf.get("op")),
        kf.get("text"),
        value_c,
        than,
        kf.get("factor", 1.0),
        kind,
    )
    if kind != STAND_IN:
        return control
    params, no_params = kf.get("params", {}), (kf.get("no_params", "") or "").strip()
    own, no_own = kf.get("instrument", None), (kf.get("no_instrument", "") or "").strip()
    for key, v in params.items():
        if not isinstance(v, (str, int, float, bool)) or not PARAM_NAME_RE.fullmatch(str(key)):
            raise BadInput(f"{where}.params.{str(key)[:40]}: give a case parameter's name and a plain value")
    if params and no_params or own is not None and no_own:
        raise BadInput(f"{where}: give params or no_params, instrument or no_instrument, not both of a pair")
    if not params and not no_params:
        raise BadInput(
            f"{where}: a stand-in's strength lives in the ledger: give params ({{case parameter: value}}) "
            f"or say in no_params why it has none"
        )
    if own is None and not no_own:
        raise BadInput(
            f"{where}: a stand-in needs its own instrument (showing it does what it is said to do) or "
            f"no_instrument with the reason"
        )
    control.params, control.no_params, control.no_instrument = dict(params), no_params, no_own
    if own is not None:
        control.instrument = _parse_control(f"{where}.instrument", own, INSTRUMENT)
    return control


def load_claims(directory: Path = SUITES_DIR, suites: dict[str, Suite] | None = None) -> list[Claim]:
    """The ledger in claim order (C1, C2, ... C22), checked against the suites (those of the
    folder unless given): kept while claims.yaml and the suites' case names are unchanged,
    each caller gets its own copy (harness.base.file_cache)."""
    path = directory / CLAIMS_FILE
    if not path.exists():
        return []
    return load_claims_file(path, suites if suites is not None else load_all_suites(directory))


def load_claims_file(path: Path, suites: dict[str, Suite] | None = None) -> list[Claim]:
    """One ledger file (the seed's, or a claim pack's), checked against the suites (those of
    harness/experiments/ unless given)."""
    suites = suites if suites is not None else load_all_suites()
    names = tuple(sorted((n, tuple(c.name for c in s.cases)) for n, s in suites.items()))
    return file_cache.cached(
        ("claims", str(path.resolve()), names), [path], lambda: _parse_claims(path, suites), MAX_SPEC_BYTES
    )


def _parse_claims(path: Path, suites: dict[str, Suite]) -> list[Claim]:
    data = load_yaml(path, "claims ledger")
    if not isinstance(data, dict) or set(data) != {"claims"} or not isinstance(data["claims"], list):
        raise BadInput(f"{path}: expected one top-level field 'claims' holding a list")
    claims, seen = [], set()
    for i, raw in enumerate(data["claims"]):
        w = f"{path}: claims[{i}]"
        f = Fields(w, raw, LEDGER_FIELDS)
        identifiers.CLAIM_ID.check(f"{w}.id", f.get("id"))  # the rule results.json is read back by
        checks = [_parse_check(f"{w}.checks[{j}]", craw, suites) for j, craw in enumerate(f.get("checks", []))]
        figures = f.get("figures", {})
        for k, v in figures.items():
            vals = v if isinstance(v, list) else [v]
            for x in vals:
                finite(f"{w}.figures.{k}", x)
        claim = Claim(
            f.get("id"),
            f.get("section"),
            f.get("text"),
            checks,
            f.get("not_measurable", ""),
            f.get("differs", ""),
            f.get("not_measured", ""),
            figures,
        )
        if claim.id in seen:
            raise BadInput(f"{w}.id: {claim.id!r} is listed twice")
        if not checks and not (claim.not_measurable or claim.not_measured):
            raise BadInput(f"{w}: claim {claim.id} needs checks, or a not_measurable or not_measured reason")
        seen.add(claim.id)
        claims.append(claim)
    fixed_params(claims)  # two stand-ins fixing one parameter differently: refused here
    return sorted(claims, key=lambda c: c.order)


def validate_paths(paths: list[str], directory: Path = SUITES_DIR) -> list[str]:
    """Validate spec files (every suite of harness/experiments/ and the ledger when none are given); returns OK lines."""
    if paths:
        return [f"{p}: ok ({load_suite_file(Path(p)).name})" for p in paths]
    suites = load_all_suites(directory)
    lines = [f"{s.path}: ok ({s.name})" for s in suites.values()]
    claims = load_claims(directory, suites)
    lines.append(f"{directory / CLAIMS_FILE}: ok ({len(claims)} claims)")
    return lines
