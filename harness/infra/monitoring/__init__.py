"""Server-side telemetry through Prometheus, in two halves:

- harness.infra.monitoring.stack: starting and stopping the local stack (Prometheus, one
  redis_exporter per node, a node exporter) as plain processes with a state file;
- harness.infra.monitoring.query: reading a run's window back from Prometheus (Monitor).

On the lab the Ansible role `monitoring` runs Prometheus; `harness run --monitoring
--target INVENTORY` queries the Prometheus of the inventory's `monitoring` group (or the
URL in HARNESS_PROMETHEUS_URL) instead of starting one. Everything both halves export is
importable from `harness.infra.monitoring`.
"""

from harness.infra.monitoring.query import (  # noqa: F401
    MIN_CHART_WINDOW_S,
    QUERIES,
    Monitor,
    SeriesQuery,
    matrix_to_series,
    unavailable,
)
from harness.infra.monitoring.stack import (  # noqa: F401
    DEFAULT_PORT,
    INSTALL_HINT,
    PORT_ENV,
    RATE_WINDOW,
    SCRAPE_INTERVAL_S,
    TEMPLATE,
    TOOLS,
    URL_ENV,
    all_stacks,
    cluster_owner,
    configured_port,
    find_tool,
    http_ok,
    leftover,
    missing_tools,
    read_state,
    render_config,
    run_owner,
    stack_dir,
    stack_ports,
    stack_running,
    stacks_owned_by,
    start_stack,
    stop_stack,
    targets_up,
)
