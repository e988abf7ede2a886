"""Real text shipped with the repository (data/gptcache_mock_data.json) or given by path:
one loader for the experiments that need strings from a JSON list of records."""

from __future__ import annotations

import json
from pathlib import Path

from harness.base.errors import BadInput
from harness.base.files import loads_json
from harness.base.paths import DATA_DIR

GPTCACHE_FILE = DATA_DIR / "gptcache_mock_data.json"


def texts_from_records(path: str | Path, fields: tuple[str, ...], what: str) -> list[str]:
    """The strings under `fields` of every record of a JSON list, in file order (a record
    that is itself a string is taken as it is). `what` names the caller in the messages.
    A missing file, invalid JSON, a record with none of the fields, or no text at all is
    one clear BadInput."""
    path = Path(path)
    wanted = " or ".join(repr(f) for f in fields)
    hint = f"give a JSON list of strings or of objects with {wanted} strings (default: data/gptcache_mock_data.json)"
    if not path.exists():
        raise BadInput(f"{path}: text file not found ({what}); {hint}")
    try:
        data = loads_json(path.read_text())
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}: not valid JSON ({e}); {hint}") from None
    if not isinstance(data, list) or not data:
        raise BadInput(f"{path}: expected a non-empty JSON list of records; {hint}")
    texts: list[str] = []
    for i, rec in enumerate(data):
        if isinstance(rec, str):
            texts.append(rec)
            continue
        found = [rec[k] for k in fields if isinstance(rec, dict) and isinstance(rec.get(k), str)]
        if not found:
            raise BadInput(f"{path}: record {i} has no {wanted} string; {hint}")
        texts += found
    return texts
