"""tools/relayout.py: the move of harness/'s flat modules into its layer folders (issue 41),
re-applicable to files written before the move."""

from __future__ import annotations

from tests import REPO
from tools import relayout

HARNESS = REPO / "harness"

BEFORE = """\
from harness import serving_engine, stats
from harness import publish as P
from harness.report.views import view
from harness.report import format as F, views
from harness.publish import publish
from harness import (
    driver_contract,
    __version__,
)
import harness.worker
CMD = ["python", "-m", "harness.worker"]
TARGET = "harness.cluster.subprocess.run"
# see harness/report/views/serving.py, harness/tools/memtier.py and harness/publish.py; not .harness/cluster
"""

AFTER = """\
from harness.infra import serving_engine
from harness.base import stats
from harness.publish import outputs as P
from harness.publish.views import view
from harness.verdict import display as F
from harness.publish import views
from harness.publish.outputs import publish
from harness.model import driver_contract
from harness import __version__
import harness.run.worker
CMD = ["python", "-m", "harness.run.worker"]
TARGET = "harness.infra.cluster.subprocess.run"
# see harness/publish/views/serving.py, harness/infra/load_tools/memtier.py and harness/publish/outputs.py; not .harness/cluster
"""


def test_a_file_written_before_the_move_is_rewritten():
    assert relayout.rewrite_text(BEFORE) == AFTER


def test_rewriting_is_idempotent():
    assert relayout.rewrite_text(AFTER) == AFTER


def test_every_new_module_exists_and_no_old_one_is_left():
    for old, new in relayout.MOVES.items():
        path = HARNESS / new.replace(".", "/")
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), new
        if old not in relayout.AMBIGUOUS and "." not in old:
            assert not (HARNESS / f"{old}.py").exists() and not (HARNESS / old).exists(), old
