"""The report's server-side telemetry section: charts and per-node tables from the
Prometheus series a run kept (results.json "monitoring")."""

from __future__ import annotations

from harness.experiments.views import Chart, Table


def series_stats(points: list[list[float]]) -> dict:
    """Mean, peak and last value of a series' y values (None when empty)."""
    ys = [p[1] for p in points]
    if not ys:
        return {"mean": None, "peak": None, "last": None}
    return {"mean": sum(ys) / len(ys), "peak": max(ys), "last": ys[-1]}


def blocks(mon: dict) -> list:
    queries = mon.get("queries") or []
    series = {q["key"]: q.get("series", []) for q in queries}
    charts = [
        Chart(q["title"], q.get("series", []), "seconds since the run window opened", q.get("unit", ""))
        for q in queries
    ]
    return charts + build_tables(series, mon.get("roles") or {})


def build_tables(series: dict[str, list[dict]], roles: dict[str, str]) -> list:
    """Per-node and per-host summary tables of the queried series."""

    def stat(key: str, name: str, which: str):
        for s in series.get(key, []):
            if s["name"] == name:
                v = series_stats(s["points"])[which]
                return v
        return "-"

    nodes = sorted({s["name"] for k in ("ops", "memory", "clients", "evicted") for s in series.get(k, [])})
    rows = [
        [
            n,
            roles.get(n, ""),
            stat("ops", n, "mean"),
            stat("ops", n, "peak"),
            stat("memory", n, "peak"),
            stat("clients", n, "peak"),
            stat("evicted", n, "peak"),
        ]
        for n in nodes
    ]
    tables = [
        Table(
            "Per node over the run window (Prometheus)",
            [
                "node",
                "role",
                "ops/s mean",
                "ops/s peak",
                "memory peak (MiB)",
                "clients peak",
                "evicted keys (peak of counter)",
            ],
            rows,
        )
    ]
    hosts = [s["name"] for s in series.get("cpu", [])]
    if hosts:
        tables.append(
            Table(
                "Host CPU over the run window (node exporter)",
                ["host", "CPU busy mean (%)", "CPU busy peak (%)"],
                [[h, stat("cpu", h, "mean"), stat("cpu", h, "peak")] for h in hosts],
            )
        )
    return tables
