"""The serving engine under test: vLLM's CPU build serving SmolLM2 on loopback, or a server
the user points at.

- `install`: its own venv under .harness/engine/venv (`harness engine install`).
- `local`: one engine's lifecycle (`harness engine up|down|status`).
- `for_run`: the engines of a `harness run` (started once, before the first case that needs them).
- `external`: a server the user names (HARNESS_LLM_URL/HARNESS_LLM_MODEL, inventory group `llm`).
- `metrics`: what a case reads from an endpoint: `alive`, `cache_config`, `prefix_cache_counters`.
"""

from harness.infra.serving_engine.metrics import alive, cache_config, metrics, parse_prometheus, prefix_cache_counters
from harness.infra.serving_engine.require import require_engine

__all__ = ["alive", "cache_config", "metrics", "parse_prometheus", "prefix_cache_counters", "require_engine"]
