"""verdicts.json: the ledger's verdicts as the report shows them, for programs.

Per claim and per check: suite, case, metric, the claimed threshold or band and which side
is better, the measured median and values, each control's value and whether it held, the
reference cross-check, the conditions the check needs and what the run measured, the
verdict and its reason; the thresholds' verdicts beside them. Versioned like results.json
(`format`, `version`); written by `harness run` and `harness report` (harness.publish.outputs), with
the digest of the ledger that judged the run (`ledger_sha256`).

`changes(before, after)` lists the claims (and checks) whose verdict differs between two
runs: what `harness compare` prints first and what the report of a run with a baseline
shows first. A results folder without a verdicts.json of this version (written before it)
has its verdicts computed from its results.json, and says so.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

from harness.base.errors import BadInput
from harness.base.files import loads_json, read_bounded, write_atomic
from harness.base.safe_text import BLOCK, NAME, TEXT, for_terminal
from harness.model import identifiers
from harness.model.stored_run import RunData, claim_id_problem, load_run, redacted_by_folder
from harness.verdict.analysis import HOLDS, Analysis, CheckVerdict, ClaimVerdict, MetricSummary, analyze
from harness.verdict.display import check_text, control_text, threshold_text

VERDICTS_FILE = "verdicts.json"
FORMAT = "harness-verdicts"
VERSION = 1
# how a change of verdict reads: from a verdict that holds to one that does not is a regression
REGRESSED, RECOVERED, CHANGED = "regressed", "recovered", "changed"
NEW, UNJUDGED = "newly judged", "not judged now"  # from or to a claim not run (or absent)
ORDER = (REGRESSED, CHANGED, RECOVERED, NEW, UNJUDGED)
NOT_JUDGED = ("absent", "not run")
MAX_BYTES = 64 << 20  # the ledger's verdicts of a real run take a few hundred KB


def _num(x):
    """A number JSON can hold (an infinite or NaN one is None)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        return x if math.isfinite(x) else None
    except OverflowError:  # an int past a float's range (an edited results.json)
        return None


def _measured(m: MetricSummary | None) -> dict | None:
    if m is None:
        return None
    return {
        "median": _num(m.median),
        "min": _num(m.min),
        "max": _num(m.max),
        "spread": _num(m.spread),
        "noisy": m.noisy,
        "unit": m.unit,
        "values": [_num(v) for v in m.values],
    }


def _claimed(k: CheckVerdict) -> dict:
    c = k.check
    out: dict[str, Any] = {"text": check_text(c), "better": c.better or None, "unit": c.unit}
    if c.band is not None:
        out["band"] = [_num(c.band[0]), _num(c.band[1])]
    else:
        out.update(op=c.op, value=_num(c.value))
    if c.band_reason:
        out["band_reason"] = c.band_reason
    return out


def _controls(k: CheckVerdict) -> list[dict]:
    out = [
        {
            "kind": r.control.kind,
            "label": r.control.label,
            "check": control_text(r.control),
            "text": r.control.text,
            "measured": _measured(r.summary),
            "compared_with": _num(r.reference),
            "held": r.held,
        }
        for r in k.controls
    ]
    chk = k.check
    out += [
        {"kind": kind, "label": label, "none": why}
        for kind, label, why in (
            ("instrument", "instrument", chk.no_instrument),
            ("mechanism_off", "mechanism off", chk.no_mechanism_off),
        )
        if why
    ]
    return out


def _reference(k: CheckVerdict) -> dict | None:
    if k.reference is None:
        return None
    ref = k.reference.reference
    return {
        "metric": ref.metric,
        "tolerance": _num(ref.tolerance),
        "text": ref.text,
        "measured": _measured(k.reference.summary),
        "agrees": k.reference.agrees,
    }


def _check(k: CheckVerdict) -> dict:
    c = k.check
    return {
        "suite": c.suite,
        "case": c.case,
        "metric": c.metric,
        "claimed": _claimed(k),
        "observed": c.observed,
        "measured": _measured(k.summary),
        "controls": _controls(k),
        "reference": _reference(k),
        "conditions": {"needed": c.conditions, "measured": k.facts},
        "verdict": str(k.outcome),
        "holds": k.outcome in HOLDS,
        "reason": k.reason,
    }


def deciding_check(cv: ClaimVerdict) -> CheckVerdict | None:
    """The check that gave the claim its verdict (the first with the claim's outcome)."""
    return next((k for k in cv.checks if k.outcome == cv.outcome), cv.checks[0] if cv.checks else None)


def _claim(cv: ClaimVerdict) -> dict:
    return {
        "id": cv.id,
        "section": cv.claim.section,
        "text": cv.claim.text,
        "verdict": str(cv.outcome),
        "holds": cv.outcome in HOLDS,
        "note": cv.note,
        "differs": cv.claim.differs,
        "checks": [_check(k) for k in cv.checks],
    }


def document(run: RunData, a: Analysis) -> dict:
    """verdicts.json's content for an analysed run."""
    man = run.manifest
    thresholds = [
        {
            "suite": t.suite,
            "case": t.threshold.case,
            "metric": t.threshold.metric,
            "threshold": threshold_text(t.threshold),
            "measured": _measured(t.summary),
            "verdict": str(t.verdict),
            "claim": t.claim_id or None,
            "detail": t.detail,
        }
        for t in a.thresholds
    ]
    git = man.git if isinstance(man.git, dict) else {}
    ledger = json.dumps([c.to_json() for c in run.claims], sort_keys=True, default=str)
    return _escaped(
        {
            "format": FORMAT,
            "version": VERSION,
            "run_id": man.run_id or run.run_dir.name,
            "ledger_sha256": hashlib.sha256(ledger.encode("utf-8", "backslashreplace")).hexdigest(),
            "profile": man.profile,
            "target": man.target,
            "revision": git.get("revision"),
            "started": _num(man.started),
            "ended": _num(man.ended),
            "interrupted": run.interrupted if isinstance(run.interrupted, dict) else None,
            "exit_code": a.exit_code,
            "exit_reason": a.exit_reason,
            "pack": _pack(man.pack),
            "claims": [_claim(cv) for cv in a.claims],
            "thresholds": thresholds,
        }
    )


def _escaped(o):
    """`o` with every string in it (keys too) escaped as the pack's title is (for_terminal:
    control, format and separator characters shown as `\\x1b`, `\\n`, `\\u202e`; at most
    BLOCK characters): a claim's text, a quote, a check's text or a reason from a pack's ledger
    or a stored file carries no escape sequence or forged line into what reads verdicts.json."""
    if isinstance(o, str):
        return for_terminal(o, BLOCK)
    if isinstance(o, dict):
        return {(for_terminal(k, BLOCK) if isinstance(k, str) else k): _escaped(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [v if v.__class__ in (int, float, bool) else _escaped(v) for v in o]
    return o


def _pack(pack: dict) -> dict:
    """The claim pack the run judged (the seed's ledger when the run named none): name,
    title and source address, bounded (the manifest is a stored file)."""
    if not pack:
        return {"name": "seed"}
    src = pack.get("source") if isinstance(pack.get("source"), dict) else None
    return {
        "name": for_terminal(str(pack.get("name", "?")), NAME),
        "title": for_terminal(str(pack.get("title", "")), TEXT),
        "source_url": for_terminal(str(src.get("url", "")), TEXT) if src else "",
    }


def write(run: RunData, a: Analysis) -> Path:
    doc = document(run, a)
    return write_atomic(run.run_dir / VERDICTS_FILE, json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n")


def load(run_dir: Path) -> tuple[dict, str]:
    """A results folder's verdicts and where they come from: its verdicts.json, or (a folder
    written before this version, or by a newer harness) computed now from its results.json.
    The file is read bounded, never through a link, and checked by its schema: anything else
    is one line naming the file (BadInput, exit 2)."""
    f = Path(run_dir) / VERDICTS_FILE
    fix = f"run `harness report {for_terminal(str(run_dir), NAME)}` to write it anew from results.json"
    if not os.path.lexists(f):
        run = load_run(Path(run_dir))
        return document(run, analyze(run)), "computed now from its results.json (it has no verdicts.json)"
    raw = read_bounded(f, MAX_BYTES, "verdicts.json", fix, follow=False)
    try:
        doc = loads_json(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BadInput(f"{f}: not valid JSON ({type(e).__name__}); verdicts.json is damaged; {fix}") from None
    if not (isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("version") == VERSION):
        run = load_run(Path(run_dir))
        return document(run, analyze(run)), (
            f"computed now from its results.json (its verdicts.json is not version {VERSION} of {FORMAT})"
        )
    problem = schema_problem(doc)
    if problem:
        raise BadInput(f"{f}: {problem}; the file was edited or damaged; {fix}")
    return redacted_by_folder(run_dir, doc), str(f)  # an older or edited file may hold a secret


_TEXT = (str, type(None))
_CLAIM_FIELDS = {
    "verdict": str,
    "holds": bool,
    "text": _TEXT,
    "note": _TEXT,
    "section": _TEXT,
    "differs": _TEXT,
    "checks": list,
}
_CHECK_FIELDS = {"suite": str, "case": str, "metric": str, "verdict": str, "reason": _TEXT}


def _wrong(d: dict, fields: dict, where: str) -> str:
    for key, kind in fields.items():
        if key in d and not isinstance(d[key], kind):
            return f"{where}'s {key} is a {type(d[key]).__name__}"
    return ""


def schema_problem(doc: dict) -> str:
    """'' when `doc` (format and version already checked) has the types the readers use:
    claims a list of objects with an id of 1-64 printable characters, a text verdict, a
    boolean holds, text fields, and checks that are objects naming suite, case, metric and
    verdict in text; else what is wrong, in words."""
    if not isinstance(doc.get("claims"), list):
        return f"claims is a {type(doc.get('claims')).__name__}, not a list"
    seen = set()
    for i, c in enumerate(doc["claims"]):
        if not isinstance(c, dict):
            return f"claims[{i}] is a {type(c).__name__}, not an object"
        bad = claim_id_problem(c.get("id"))
        if bad:
            return f"claims[{i}]: {bad}"
        if c["id"] in seen:
            return f"claims[{i}]: claim {c['id']} is listed twice"
        seen.add(c["id"])
        where = f"claim {c['id']}"
        bad = _wrong(c, _CLAIM_FIELDS, where) or ("" if "verdict" in c else f"{where} has no verdict")
        if bad:
            return bad
        for j, k in enumerate(c.get("checks") or []):
            if not isinstance(k, dict):
                return f"{where}: checks[{j}] is a {type(k).__name__}, not an object"
            bad = _wrong(k, _CHECK_FIELDS, f"{where}: checks[{j}]")
            if bad:
                return bad
    if "thresholds" in doc and not isinstance(doc["thresholds"], list):
        return f"thresholds is a {type(doc['thresholds']).__name__}, not a list"
    return ""


def ledger_note(before: dict, after: dict) -> str:
    """'' when both sides were judged by the same ledger (or one does not say), else a line
    saying that a verdict change may be the ledger's, not the measurement's."""
    a, b = before.get("ledger_sha256"), after.get("ledger_sha256")
    if not a or not b or a == b:
        return ""
    return (
        "the two runs were judged by different ledgers (harness/experiments/claims.yaml changed between them): "
        "a verdict change may come from the ledger, not from what was measured"
    )


def _by_key(doc: dict) -> dict:
    out = {}
    for c in doc.get("claims") or []:
        if not isinstance(c, dict) or not isinstance(c.get("id"), str):
            raise BadInput(
                "a verdicts.json claim has no id: the file was edited; re-run `harness report` on its folder"
            )
        out[c["id"]] = c
    return out


def _kind(before: dict | None, after: dict | None) -> str:
    if (after or {}).get("verdict", "absent") in NOT_JUDGED:
        return UNJUDGED
    if (before or {}).get("verdict", "absent") in NOT_JUDGED:
        return NEW
    held = bool(before and before.get("holds"))
    holds = bool(after and after.get("holds"))
    return REGRESSED if held and not holds else RECOVERED if holds and not held else CHANGED


def _check_changes(before: dict, after: dict) -> list[dict]:
    def key(k):
        return (k.get("suite"), k.get("case"), k.get("metric"))

    old = {key(k): k for k in before.get("checks") or [] if isinstance(k, dict)}
    out = []
    for k in after.get("checks") or []:
        if not isinstance(k, dict):
            continue
        o = old.get(key(k))
        if o is None or o.get("verdict") != k.get("verdict"):
            out.append(
                {
                    "suite": k.get("suite"),
                    "case": k.get("case"),
                    "metric": k.get("metric"),
                    "before": o.get("verdict") if o else "absent",
                    "after": k.get("verdict"),
                    "reason": k.get("reason", ""),
                }
            )
    return out


def changes(before: dict, after: dict) -> list[dict]:
    """The claims whose verdict differs from `before` to `after`, regressions first: id,
    before, after, kind (regressed: it held and no longer does; changed; recovered; newly
    judged: not run before; not judged now: not run now), the new reason, and the checks
    whose verdict changed."""
    old, new = _by_key(before), _by_key(after)
    out = []
    for cid in sorted(set(old) | set(new), key=identifiers.id_order):  # any id sorts, an edited file's too
        o, n = old.get(cid), new.get(cid)
        vo, vn = (o or {}).get("verdict", "absent"), (n or {}).get("verdict", "absent")
        if vo == vn:
            continue
        reason = next(
            (
                k.get("reason", "")
                for k in (n or {}).get("checks") or []
                if isinstance(k, dict) and k.get("verdict") == vn
            ),
            (n or {}).get("note", ""),
        )
        out.append(
            {
                "id": cid,
                "before": vo,
                "after": vn,
                "kind": _kind(o, n),
                "reason": reason,
                "text": (n or o or {}).get("text", ""),
                "checks": _check_changes(o or {}, n or {}),
            }
        )
    return sorted(out, key=lambda c: ORDER.index(c["kind"]))
