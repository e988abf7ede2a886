"""Inline SVG charts (no JavaScript, no external files): line, scatter and bar charts, with
optional min-max whiskers per point ([x, y, ymin, ymax]). Every text and attribute value
goes through harness.report.format.esc (quotes included)."""

from __future__ import annotations

import math

from harness.report.format import esc as escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939")
W, H = 640, 320
ML, MR, MT, MB = 64, 150, 28, 48  # margins: left, right (legend), top, bottom


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = math.ceil(lo / step) * step
    out, v = [], start
    while v <= hi + step * 1e-9:
        out.append(round(v, 12))
        v += step
    return out


def _label(v: float) -> str:
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def _range(p) -> str:
    if len(p) >= 4 and p[2] is not None and p[3] is not None:
        return f"; min {p[2]:g}, max {p[3]:g}"
    return ""


def chart(title: str, series: list[dict], x_label: str = "", y_label: str = "",
          kind: str = "line", x_log: bool = False, y_log: bool = False) -> str:
    """series: [{"name": str, "points": [[x, y], ...]}]; x may be strings (categories)."""
    pts_all = [p for s in series for p in s.get("points", []) if p[1] is not None]
    if not pts_all:
        return f'<p class="muted">{escape(title)}: no data</p>'
    categorical = any(isinstance(p[0], str) for p in pts_all)
    cats: list = []
    if categorical:
        for p in pts_all:
            if p[0] not in cats:
                cats.append(p[0])
    tx = (lambda v: math.log10(v)) if x_log else (lambda v: v)
    ty = (lambda v: math.log10(v)) if y_log else (lambda v: v)
    if x_log:
        pts_all = [p for p in pts_all if categorical or p[0] > 0]
    if y_log:
        pts_all = [p for p in pts_all if p[1] > 0]
    if not pts_all:
        return f'<p class="muted">{escape(title)}: no positive data for a log axis</p>'
    if categorical:
        xlo, xhi = -0.5, len(cats) - 0.5
    else:
        xs = [tx(p[0]) for p in pts_all]
        xlo, xhi = min(xs), max(xs)
        if xlo == xhi:
            xlo, xhi = xlo - 1, xhi + 1
    ys = [ty(v) for p in pts_all for v in ([p[1]] + [w for w in p[2:4] if w is not None and (not y_log or w > 0)])]
    ylo, yhi = min(ys), max(ys)
    if not y_log:
        ylo = min(0.0, ylo)
    if ylo == yhi:
        yhi = ylo + 1
    yhi += (yhi - ylo) * 0.05
    pw, ph = W - ML - MR, H - MT - MB

    def px(x):
        v = cats.index(x) if categorical else tx(x)
        return ML + (v - xlo) / (xhi - xlo) * pw

    def py(y):
        return MT + ph - (ty(y) - ylo) / (yhi - ylo) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
           f'role="img" aria-label="{escape(title)}" class="chart">',
           f'<text x="{ML}" y="18" class="ct">{escape(title)}</text>',
           f'<rect x="{ML}" y="{MT}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>']
    for t in _ticks(ylo, yhi):
        y = MT + ph - (t - ylo) / (yhi - ylo) * ph
        lab = _label(10 ** t) if y_log else _label(t)
        out.append(f'<line x1="{ML}" x2="{ML + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{ML - 6}" y="{y + 4:.1f}" text-anchor="end" class="tk">{lab}</text>')
    if categorical:
        for i, c in enumerate(cats):
            x = ML + (i - xlo) / (xhi - xlo) * pw
            out.append(f'<text x="{x:.1f}" y="{MT + ph + 16}" text-anchor="middle" class="tk">{escape(str(c))}</text>')
    else:
        for t in _ticks(xlo, xhi):
            x = ML + (t - xlo) / (xhi - xlo) * pw
            lab = _label(10 ** t) if x_log else _label(t)
            out.append(f'<text x="{x:.1f}" y="{MT + ph + 16}" text-anchor="middle" class="tk">{lab}</text>')
    out.append(f'<text x="{ML + pw / 2}" y="{H - 8}" text-anchor="middle" class="al">{escape(x_label)}'
               f'{" (log)" if x_log else ""}</text>')
    out.append(f'<text x="14" y="{MT + ph / 2}" text-anchor="middle" class="al" '
               f'transform="rotate(-90 14 {MT + ph / 2})">{escape(y_label)}{" (log)" if y_log else ""}</text>')
    nser = max(len(series), 1)
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = [p for p in s.get("points", []) if p[1] is not None and (not y_log or p[1] > 0)
               and (categorical or not x_log or p[0] > 0)]
        if not pts:
            continue
        if kind == "bar" and categorical:
            bw = pw / len(cats) / (nser + 1)
            for p in pts:
                x = px(p[0]) - pw / len(cats) / 2 + bw * (i + 0.5)
                y = py(p[1])
                out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{MT + ph - y:.1f}" '
                           f'fill="{color}"><title>{escape(s["name"])} {escape(str(p[0]))}: {p[1]:g}</title></rect>')
        else:
            coords = [(px(p[0]), py(p[1]), p) for p in pts]
            if kind == "line" and len(coords) > 1:
                d = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in coords)
                out.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="1.8"/>')
            for x, y, p in coords:
                if len(p) >= 4 and p[2] is not None and p[3] is not None and (not y_log or min(p[2], p[3]) > 0):
                    out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{py(p[2]):.1f}" y2="{py(p[3]):.1f}" '
                               f'stroke="{color}" stroke-width="1" opacity="0.6"/>')
                out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{2.5 if kind == "line" else 3}" fill="{color}">'
                           f'<title>{escape(s["name"])}: ({escape(str(p[0]))}, {p[1]:g}{_range(p)})</title></circle>')
        ly = MT + 6 + i * 16
        out.append(f'<rect x="{W - MR + 10}" y="{ly}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{W - MR + 24}" y="{ly + 9}" class="lg">{escape(str(s["name"])[:22])}</text>')
    out.append("</svg>")
    return "".join(out)
