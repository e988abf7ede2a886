"""Claim packs: a paper's, README's or vendor's claims, judged by the same ledger.

A pack is a folder (harness/experiments/packs/NAME/, or any folder a user gives):
- `pack.yaml`: its name and title, its source (what kind, where, the exact sentences and
  numbers it states, with where in the source each one is), the profile parameters that make
  its cases run the source's setup where this machine can (suite -> case -> parameter), and
  optionally `claims:` naming its ledger file (claims.yaml beside it by default);
- its claims (the ledger format of harness/experiments/claims.yaml);
- a README naming the source.
The seed pack's ledger is harness/experiments/claims.yaml, the one `harness run` judges
without --pack. A problem in a pack is one BadInput line naming the file and the field.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.errors import BadInput, did_you_mean
from harness.base.paths import SUITES_DIR
from harness.model import driver_contract, identifiers, ledger, ledger_parse, metric_names, spec, yaml_fields

PACKS_DIR = SUITES_DIR / "packs"
PACK_FILE = "pack.yaml"
SEED = "seed"
KINDS = ("paper", "readme", "documentation", "blog", "article", "issue", "dataset")
PACK_FIELDS = {
    "name": (str, "the pack's name: lower-case letters, digits and dashes"),
    "title": (str, "one line: what the source is"),
    "source": (dict, "kind, title, url, quotes"),
    "claims": (str, "the ledger file, relative to the pack's folder (claims.yaml by default)"),
    "params": (dict, "suite -> case -> parameter: the source's setup"),
}
SOURCE_FIELDS = {
    "kind": (str, f"one of {', '.join(KINDS)}"),
    "title": (str, "the source's own title"),
    "url": (str, "where to read it: an https:// address"),
    "no_url": (str, "why the source has no address (instead of url)"),
    "quotes": (list, "the exact sentences the claims test, each {text, where}"),
}
QUOTE_FIELDS = {"text": (str, "the sentence, as the source words it"), "where": (str, "section, page or line")}


@dataclass(frozen=True)
class Quote:
    text: str
    where: str


@dataclass(frozen=True)
class Source:
    kind: str
    title: str
    url: str
    quotes: tuple[Quote, ...]
    no_url: str = ""

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "title": self.title,
            "url": self.url,
            "no_url": self.no_url,
            "quotes": [{"text": q.text, "where": q.where} for q in self.quotes],
        }


@dataclass
class Pack:
    name: str
    title: str
    folder: Path
    source: Source
    claims_path: Path
    params: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def claims(self, suites: dict[str, spec.Suite] | None = None) -> list[ledger.Claim]:
        return ledger_parse.load_claims_file(self.claims_path, suites)

    def cases(self, claims: list[ledger.Claim] | None = None) -> list[str]:
        """SUITE/CASE of every check of its claims, in claim order, once each."""
        got = claims if claims is not None else self.claims()
        return list(dict.fromkeys(f"{chk.suite}/{chk.case}" for c in got for chk in c.checks))

    def record(self) -> dict:
        """What a run of the pack stores in its manifest."""
        return {"name": self.name, "title": self.title, "source": self.source.to_json()}


def count(n: int, noun: str) -> str:
    """'1 claim', '2 claims'."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


class Shipped(str):
    """A name `names()` gives: always the shipped pack of that name, whatever folders the
    working directory holds (`harness packs`, `harness validate`)."""


def names() -> list[str]:
    """The packs shipped, the seed first."""
    found = sorted(p.parent.name for p in PACKS_DIR.glob(f"*/{PACK_FILE}"))
    return [Shipped(n) for n in sorted(found, key=lambda n: n != SEED)]


def load(ref: str | Path) -> Pack:
    """A shipped pack by name, or a pack folder (or its pack.yaml) a user gives. A name that is
    both a shipped pack and a file or folder here is refused: the user says which."""
    return _parse(PACKS_DIR / ref if isinstance(ref, Shipped) else _folder(ref))


def _folder(ref: str | Path) -> Path:
    path = Path(ref)
    if isinstance(ref, str) and identifiers.PACK_NAME.ok(ref):
        shipped, here = (PACKS_DIR / ref / PACK_FILE).is_file(), os.path.lexists(ref)
        if shipped and here:
            raise BadInput(
                f"{ref!r} is both a shipped claim pack and a {'folder' if path.is_dir() else 'file'} here; "
                f"give ./{ref} for the folder or {PACKS_DIR / ref} for the shipped pack"
            )
        if shipped:
            return PACKS_DIR / ref
        if not here:
            raise BadInput(
                f"no claim pack {ref!r}{did_you_mean(ref, names())}; packs: {', '.join(names())} "
                f"(or give a pack's folder)"
            )
    elif isinstance(ref, str) and identifiers.PACK_NAME.ok(ref.strip()) and not os.path.lexists(ref):
        raise BadInput(f"claim pack {ref!r}: a pack's name has no spaces or newlines around it; give {ref.strip()}")
    folder = path.parent if path.name == PACK_FILE else path
    if not (folder / PACK_FILE).is_file():
        raise BadInput(f"{folder}: no {PACK_FILE} in it; a claim pack is a folder with {PACK_FILE} and its claims")
    return folder


def _parse(folder: Path) -> Pack:
    path = folder / PACK_FILE
    f = yaml_fields.Fields(str(path), yaml_fields.load_yaml(path, "claim pack"), PACK_FIELDS)
    name = identifiers.PACK_NAME.check(f"{path}: field 'name'", f.get("name"))
    claims_path = (folder / f.get("claims", spec.CLAIMS_FILE)).resolve()
    if not claims_path.is_file():
        raise BadInput(f"{path}: field 'claims': {claims_path} is not a file; the pack's ledger goes there")
    return Pack(
        name,
        _one_line(path, "title", f.get("title")),
        folder,
        _source(path, f.get("source")),
        claims_path,
        _params(path, f.get("params", {})),
    )


def _one_line(path: Path, key: str, text: str) -> str:
    if not text.strip() or "\n" in text.strip() or len(text) > 300:
        raise BadInput(f"{path}: field {key!r}: one line of text (at most 300 characters)")
    return text.strip()


def _source(path: Path, raw: dict) -> Source:
    where = f"{path}: source"
    f = yaml_fields.Fields(where, raw, SOURCE_FIELDS)
    kind, url, no_url = f.get("kind"), f.get("url", ""), f.get("no_url", "")
    if kind not in KINDS:
        raise BadInput(f"{where}.kind: {kind!r} is not one of {', '.join(KINDS)}")
    if not url and not no_url.strip():
        raise BadInput(f"{where}: give url (an https:// address), or no_url saying why the source has none")
    if url and not re.fullmatch(r"https://[A-Za-z0-9.-]+(/[^\s<>\"']*)?", url):
        raise BadInput(f"{where}.url: {url!r} is not an https:// address (the report links it)")
    quotes = []
    for i, q in enumerate(f.get("quotes")):
        qf = yaml_fields.Fields(f"{where}.quotes[{i}]", q, QUOTE_FIELDS)
        quotes.append(Quote(qf.get("text").strip(), qf.get("where").strip()))
    if not quotes:
        raise BadInput(f"{where}.quotes: quote at least one sentence of the source, with where it is")
    return Source(kind, _one_line(path, "source.title", f.get("title")), url, tuple(quotes), no_url.strip())


def _params(path: Path, raw: dict) -> dict[str, dict[str, dict[str, Any]]]:
    """suite -> case -> {parameter: value}, each checked against the suite's declared parameters."""
    suites = spec.load_all_suites()
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for sname, cases in raw.items():
        where = f"{path}: params.{sname}"
        if sname not in suites:
            raise BadInput(f"{where}: no suite {sname!r}{did_you_mean(str(sname), list(suites))}")
        if not isinstance(cases, dict):
            raise BadInput(f"{where}: expected case -> {{parameter: value}}")
        known = [c.name for c in suites[sname].cases]
        for cname, params in cases.items():
            if cname not in known:
                raise BadInput(f"{where}.{cname}: suite {sname} has no case {cname!r}{did_you_mean(str(cname), known)}")
            if not isinstance(params, dict) or not params:
                raise BadInput(f"{where}.{cname}: expected {{parameter: value}}")
            _check_params(f"{where}.{cname}", suites[sname], suites[sname].case(cname), params)
            out.setdefault(sname, {})[cname] = dict(params)
    return out


def _check_params(where: str, suite: spec.Suite, case: spec.Case, given: dict) -> None:
    """The pack's parameters of one case, each against its declaration (a name the driver does
    not have, a value out of its range), then together with the case's own and each profile's
    (the driver's checks of their combination): every problem is one line naming pack.yaml and
    the field, params.SUITE.CASE.PARAM, not the suite's spec."""
    drv = driver_contract.get(case.driver, where)
    for key, value in given.items():
        if key not in drv.params:
            raise BadInput(
                f"{where}: case {case.name!r} (driver {drv.name!r}) has no parameter {key!r}"
                f"{did_you_mean(str(key), drv.params)}; its parameters: {', '.join(sorted(drv.params)) or 'none'}"
            )
        drv.params[key].check(f"{where}.{key}", value)
    for prof in suite.profiles.values():
        drv.resolve_params(
            f"{where} (with profile {prof.name})", {**case.params, **prof.params.get(case.name, {}), **given}
        )


def validate(ref: str | Path) -> list[str]:
    """`harness validate` of a pack: its fields, its claims against the suites and their
    declared metrics, its parameters against the cases'; ok lines, or one BadInput line."""
    pack = load(ref)
    suites = spec.load_all_suites()
    claims = pack.claims(suites)
    metric_names.refuse_undeclared(suites, claims)  # the parameters were checked by load()
    return [
        f"{pack.folder / PACK_FILE}: ok (pack {pack.name}: {count(len(claims), 'claim')}, {count(len(pack.cases(claims)), 'case')})"
    ]
