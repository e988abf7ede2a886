"""The format version of every file the harness stores, in one place.

A reader refuses a newer version than it knows (upgrade the harness) and upgrades an older
one when it loads it (harness.model.stored_run.load_run for results.json and manifest.json), so
that nothing past loading knows old formats.
"""

from __future__ import annotations

RESULTS_SCHEMA = 3  # results.json "schema_version"; 1 had no series and kept the spec as plain dicts; 2 had no
# evidence in its ledger (a check's of, exercised, configured; a reference's module; a stand-in's params): 3 has it
RESULTS_READABLE = (1, 2, 3)
MANIFEST_FORMAT = 1  # manifest.json "format_version"; a manifest without it (0) was written before the field
HISTORY_FORMAT = 1  # history.json "format_version"
CHILD_FORMAT = 1  # the job and outcome files of a case run in its own process (harness.model.child)
