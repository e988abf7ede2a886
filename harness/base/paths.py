"""Where the repository's data folders are (the package is installed editable)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# A suite is one folder of harness/experiments/: its spec (suite.yaml), drivers, view and README;
# the claims ledger (claims.yaml) judges them all and sits beside them.
SUITES_DIR = REPO_ROOT / "harness" / "experiments"
INFRA_DIR = REPO_ROOT / "infra"
TEMPLATES_DIR = REPO_ROOT / "harness" / "publish" / "templates"  # the report's and history page's
DATA_DIR = REPO_ROOT / "data"
STATE_DIR = REPO_ROOT / ".harness"  # pids and data folders of local servers (git-ignored)
CACHE_DIR = STATE_DIR / "cache"  # converted models and other artefacts kept between runs


def suite_spec(name: str, directory: Path = SUITES_DIR) -> Path:
    """The spec file of suite `name` (its folder's name is the suite's, with _ for -)."""
    return directory / name.replace("-", "_") / "suite.yaml"
