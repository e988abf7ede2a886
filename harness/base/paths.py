"""Where the repository's data folders are (the package is installed editable)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SUITES_DIR = REPO_ROOT / "suites"
INFRA_DIR = REPO_ROOT / "infra"
REPORTS_DIR = REPO_ROOT / "reports"
DATA_DIR = REPO_ROOT / "data"
STATE_DIR = REPO_ROOT / ".harness"  # pids and data folders of local servers (git-ignored)
CACHE_DIR = STATE_DIR / "cache"  # converted models and other artefacts kept between runs
