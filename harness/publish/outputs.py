"""Publishing a stored run: its report, JUnit file and terminal summary, built from the
results folder alone. `harness run` calls it when its cases are done (also after an
interrupt), `harness report` calls it for any folder, so both publish alike.

What is wrong with the folder is found when it is loaded (harness.model.stored_run.load_run: one
line naming the file, exit 2). An error past loading is the harness's own (a bug in the
analysis or in a suite's view): one line saying so, exit 3, its traceback kept in the
folder's report-error.txt; never "the folder is damaged".
"""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import EXIT_ENVIRONMENT, HarnessError
from harness.base.files import write_atomic
from harness.base.safe_text import for_terminal
from harness.model.stored_run import RunData, load_run
from harness.publish import measurements
from harness.publish.junit import write_junit
from harness.publish.render import render_report
from harness.verdict import verdicts_json as verdicts
from harness.verdict.analysis import Analysis, analyze
from harness.verdict.baseline import compare, refuse_same_run
from harness.verdict.summary import summary_text

ERROR_FILE = "report-error.txt"
JUNIT_FILE = "junit.xml"


class ReportFailed(HarnessError):
    """The harness could not build the report of a folder it loaded: its own bug (exit 3)."""

    exit_code = EXIT_ENVIRONMENT


@dataclass
class Published:
    run: RunData
    analysis: Analysis
    report: Path
    junit: Path

    @property
    def exit_code(self) -> int:
        return self.analysis.exit_code

    def summary(self) -> str:
        """The terminal summary: verdicts, case statuses, claims, the suites' wall times."""
        return summary_text(self.analysis, dict(self.run.manifest.suite_wall_s))


def publish(
    run_dir: Path, *, allow_skipped: bool = False, baseline: Path | None = None, history: str | None = None
) -> Published:
    """Load `run_dir` (and `baseline`), analyse it, write report.html, junit.xml and
    verdicts.json there; with a baseline the report starts with what changed."""
    run = load_run(run_dir)
    base = None
    if baseline is not None:
        base = load_run(baseline)
        refuse_same_run(base, run, "--baseline")
    with internal_errors(run.run_dir):
        a = analyze(run, allow_skipped=allow_skipped)
        comparison = changed = None
        if base is not None:
            comparison = compare(analyze(base), a)
            changed = verdicts.changes(verdicts.load(base.run_dir)[0], verdicts.document(run, a))
        report = render_report(run, a, comparison, history=history, changed=changed)
        junit = write_junit(run.run_dir / JUNIT_FILE, a)
        verdicts.write(run, a)
    return Published(run, a, report, junit)


def measurements_markdown(run_dir: Path) -> str:
    """docs/measurements.md's text for a results folder (harness.publish.measurements)."""
    run = load_run(run_dir)
    with internal_errors(run.run_dir):
        return measurements.markdown(run, analyze(run))


@contextlib.contextmanager
def internal_errors(run_dir: Path):
    """An exception that is not a HarnessError (nor a MemoryError): one line and exit 3, its traceback in
    report-error.txt (written as a new file, never through a link left in the folder)."""
    try:
        yield
    except (HarnessError, MemoryError):  # out of memory is the environment's (harness.cli), not a bug
        raise
    except Exception as e:  # noqa: BLE001 - a bug: kept with its traceback, told in one line
        where = ""
        try:
            write_atomic(Path(run_dir) / ERROR_FILE, traceback.format_exc().encode("utf-8", "backslashreplace"))
            where = f"; its traceback is in {Path(run_dir) / ERROR_FILE}"
        except (OSError, HarnessError):
            pass
        what = for_terminal(f"{type(e).__name__}: {e}", 200)
        raise ReportFailed(
            f"{run_dir}: the harness failed to build the report of this folder ({what}); "
            f"this is a bug in the harness, not in the folder{where}"
        ) from None
