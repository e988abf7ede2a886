"""Inline SVG charts (no JavaScript, no external files): line, scatter and bar charts, with
optional min-max whiskers per point ([x, y, ymin, ymax]). Every text and attribute value
goes through harness.verdict.display.esc (quotes included)."""

from __future__ import annotations

import math

from harness.verdict.display import esc as escape

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#637939",
)
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


class _Frame:
    """The plot area of one chart: axis ranges and the data-to-pixel mapping."""

    def __init__(self, pts_all: list, cats: list, x_log: bool, y_log: bool):
        self.cats, self.categorical, self.x_log, self.y_log = cats, bool(cats), x_log, y_log
        if self.categorical:
            self.xlo, self.xhi = -0.5, len(cats) - 0.5
        else:
            xs = [self.tx(p[0]) for p in pts_all]
            self.xlo, self.xhi = min(xs), max(xs)
            if self.xlo == self.xhi:
                self.xlo, self.xhi = self.xlo - 1, self.xhi + 1
        ys = [
            self.ty(v)
            for p in pts_all
            for v in ([p[1]] + [w for w in p[2:4] if w is not None and (not y_log or w > 0)])
        ]
        self.ylo, self.yhi = min(ys), max(ys)
        if not y_log:
            self.ylo = min(0.0, self.ylo)
        if self.ylo == self.yhi:
            self.yhi = self.ylo + 1
        self.yhi += (self.yhi - self.ylo) * 0.05
        self.pw, self.ph = W - ML - MR, H - MT - MB

    def tx(self, v):
        return math.log10(v) if self.x_log else v

    def ty(self, v):
        return math.log10(v) if self.y_log else v

    def px(self, x):
        v = self.cats.index(x) if self.categorical else self.tx(x)
        return ML + (v - self.xlo) / (self.xhi - self.xlo) * self.pw

    def py(self, y):
        return MT + self.ph - (self.ty(y) - self.ylo) / (self.yhi - self.ylo) * self.ph

    def shown(self, p) -> bool:
        return p[1] is not None and (not self.y_log or p[1] > 0) and (self.categorical or not self.x_log or p[0] > 0)


def _axes(f: _Frame, title: str, x_label: str, y_label: str) -> list[str]:
    pw, ph = f.pw, f.ph
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
        f'role="img" aria-label="{escape(title)}" class="chart">',
        f'<text x="{ML}" y="18" class="ct">{escape(title)}</text>',
        f'<rect x="{ML}" y="{MT}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>',
    ]
    for t in _ticks(f.ylo, f.yhi):
        y = MT + ph - (t - f.ylo) / (f.yhi - f.ylo) * ph
        lab = _label(10**t) if f.y_log else _label(t)
        out.append(
            f'<line x1="{ML}" x2="{ML + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text x="{ML - 6}" y="{y + 4:.1f}" text-anchor="end" class="tk">{lab}</text>'
        )
    if f.categorical:
        for i, c in enumerate(f.cats):
            x = ML + (i - f.xlo) / (f.xhi - f.xlo) * pw
            out.append(f'<text x="{x:.1f}" y="{MT + ph + 16}" text-anchor="middle" class="tk">{escape(str(c))}</text>')
    else:
        for t in _ticks(f.xlo, f.xhi):
            x = ML + (t - f.xlo) / (f.xhi - f.xlo) * pw
            lab = _label(10**t) if f.x_log else _label(t)
            out.append(f'<text x="{x:.1f}" y="{MT + ph + 16}" text-anchor="middle" class="tk">{lab}</text>')
    out.append(
        f'<text x="{ML + pw / 2}" y="{H - 8}" text-anchor="middle" class="al">{escape(x_label)}'
        f"{' (log)' if f.x_log else ''}</text>"
    )
    out.append(
        f'<text x="14" y="{MT + ph / 2}" text-anchor="middle" class="al" '
        f'transform="rotate(-90 14 {MT + ph / 2})">{escape(y_label)}{" (log)" if f.y_log else ""}</text>'
    )
    return out


def _bars(f: _Frame, s: dict, pts: list, i: int, nser: int, color: str) -> list[str]:
    out = []
    bw = f.pw / len(f.cats) / (nser + 1)
    for p in pts:
        x = f.px(p[0]) - f.pw / len(f.cats) / 2 + bw * (i + 0.5)
        y = f.py(p[1])
        out.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{MT + f.ph - y:.1f}" '
            f'fill="{color}"><title>{escape(s["name"])} {escape(str(p[0]))}: {p[1]:g}</title></rect>'
        )
    return out


def _marks(f: _Frame, s: dict, pts: list, kind: str, color: str) -> list[str]:
    """A line (kind line) and a dot per point, with its min-max whisker where it has one."""
    out = []
    coords = [(f.px(p[0]), f.py(p[1]), p) for p in pts]
    if kind == "line" and len(coords) > 1:
        d = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in coords)
        out.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="1.8"/>')
    for x, y, p in coords:
        if len(p) >= 4 and p[2] is not None and p[3] is not None and (not f.y_log or min(p[2], p[3]) > 0):
            out.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.py(p[2]):.1f}" y2="{f.py(p[3]):.1f}" '
                f'stroke="{color}" stroke-width="1" opacity="0.6"/>'
            )
        out.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{2.5 if kind == "line" else 3}" fill="{color}">'
            f"<title>{escape(s['name'])}: ({escape(str(p[0]))}, {p[1]:g}{_range(p)})</title></circle>"
        )
    return out


def chart(
    title: str,
    series: list[dict],
    x_label: str = "",
    y_label: str = "",
    kind: str = "line",
    x_log: bool = False,
    y_log: bool = False,
) -> str:
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
    if x_log:
        pts_all = [p for p in pts_all if categorical or p[0] > 0]
    if y_log:
        pts_all = [p for p in pts_all if p[1] > 0]
    if not pts_all:
        return f'<p class="muted">{escape(title)}: no positive data for a log axis</p>'
    f = _Frame(pts_all, cats, x_log, y_log)
    out = _axes(f, title, x_label, y_label)
    nser = max(len(series), 1)
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = [p for p in s.get("points", []) if f.shown(p)]
        if not pts:
            continue
        out += _bars(f, s, pts, i, nser, color) if kind == "bar" and categorical else _marks(f, s, pts, kind, color)
        ly = MT + 6 + i * 16
        out.append(
            f'<rect x="{W - MR + 10}" y="{ly}" width="10" height="10" fill="{color}"/>'
            f'<text x="{W - MR + 24}" y="{ly + 9}" class="lg">{escape(str(s["name"])[:22])}</text>'
        )
    out.append("</svg>")
    return "".join(out)
