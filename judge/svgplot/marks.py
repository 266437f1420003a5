"""How each kind of mark becomes SVG: lines (broken at points that cannot be drawn), markers,
bars, steps, vertical segments, reference lines and bands, image cells, text, and the legend.

Every function here takes a mark's properties and the panel's data-to-points transforms; a value
the axis cannot show (non-finite, non-positive on a log axis) is skipped, and coordinates are
clamped so that a huge value cannot print hundreds of digits. They also record what a legend
should not cover ("obstacles": points and boxes in points).
"""

from __future__ import annotations

import math

from judge.svgplot import budget, style
from judge.svgplot.style import esc

_LIMIT = 1e5  # pixel coordinates are clamped here: a huge value must not print 300 digits


def _px(v: float) -> str:
    return f"{min(max(v, -_LIMIT), _LIMIT):.2f}"


def _dash(ls: str, lw: float) -> str:
    d = style.DASHES[ls]
    return f' stroke-dasharray="{",".join(f"{v * lw:.2f}" for v in d)}"' if d else ""


def _opacity(alpha) -> str:
    return f' opacity="{float(alpha):.3g}"' if alpha is not None else ""


def text_el(x, y, s, fs, ha="left", va="baseline", color="#000", rotate=False) -> str:
    """A <text> at (x, y) aligned like matplotlib's ha/va; lines split on newlines."""
    lines = str(s).split("\n")
    anchor = {"left": "start", "center": "middle", "right": "end"}[ha]
    lh = 1.2 * fs
    first = {"top": 0.76 * fs, "center": 0.32 * fs - (len(lines) - 1) * lh / 2,
             "bottom": -0.24 * fs - (len(lines) - 1) * lh, "baseline": 0.0}[va]
    fill = f' fill="{color}"' if color != "#000" else ""
    if rotate:  # text reads upwards; "bottom" is then its right-hand side
        attrs = f'transform="translate({x:.2f} {y:.2f}) rotate(-90)" x="0" y="{first:.2f}"'
        x = 0.0
    else:
        attrs = f'x="{x:.2f}" y="{y + first:.2f}"'
    body = esc(lines[0]) + "".join(f'<tspan x="{x:.2f}" dy="{lh:.2f}">{esc(t)}</tspan>' for t in lines[1:])
    return f'<text {attrs} font-size="{fs:g}" text-anchor="{anchor}"{fill}>{body}</text>'


def _line(p, fx, fy, box, obstacles):
    out, segs, cur, pts = [], [], [], []
    for i, (x, y) in enumerate(zip(p["x"], p["y"])):
        if not i % budget.EVERY:
            budget.check()
        px, py = fx(x), fy(y)
        if px is None or py is None:
            if cur:
                segs.append(cur)
            cur = []
            continue
        cur.append((px, py))
        pts.append((px, py))
    if cur:
        segs.append(cur)
    alpha = _opacity(p["alpha"])
    if p["ls"]:
        d = "".join(f"M{_px(s[0][0])} {_px(s[0][1])}" + ("L" + " ".join(f"{_px(a)} {_px(b)}" for a, b in s[1:])
                                                          if len(s) > 1 else "") for s in segs)
        if d:
            out.append(f'<path d="{d}" fill="none" stroke="{p["color"]}" stroke-width="{p["lw"]:g}"'
                       f'{_dash(p["ls"], p["lw"])} stroke-linejoin="round"{alpha}/>')
        for s in segs:
            for k, ((a, b), (c, e)) in enumerate(zip(s, s[1:])):  # points along long segments, for the legend
                if not k % budget.EVERY:
                    budget.check()
                n = int(math.hypot(c - a, e - b) / 8)
                obstacles.extend((a + (c - a) * k / (n + 1), b + (e - b) * k / (n + 1), 0, 0) for k in range(1, n + 1))
    if p["marker"]:
        out.append(_markers(pts, p["marker"], p["ms"], p["color"], alpha))
    obstacles.extend((a, b, 0, 0) for a, b in pts)
    return out


def _markers(pts, marker, size, color, alpha) -> str:
    d = "".join(style.marker_path(marker, x, y, size) for x, y in pts if abs(x) < _LIMIT and abs(y) < _LIMIT)
    fill = "none" if style.is_open_marker(marker) else color
    return f'<path d="{d}" fill="{fill}" stroke="{color}" stroke-width="1"{alpha}/>' if d else ""


def _scatter(p, fx, fy, box, obstacles):
    pts = [(fx(x), fy(y)) for x, y in zip(p["x"], p["y"])]
    pts = [(a, b) for a, b in pts if a is not None and b is not None]
    obstacles.extend((a, b, 0, 0) for a, b in pts)
    return [_markers(pts, p["marker"], p["ms"], p["color"], _opacity(p["alpha"]))]


def _rect(xa, xb, ya, yb, color, alpha="") -> str:
    x, y = min(xa, xb), min(ya, yb)
    return (f'<rect x="{_px(x)}" y="{_px(y)}" width="{_px(abs(xb - xa))}" height="{_px(abs(yb - ya))}" '
            f'fill="{color}"{alpha}/>')


def _bars(p, fx, fy, box, obstacles):
    out = []
    for x, wd, hgt, col in p["bars"]:
        xa, xb, ya, yb = fx(x - wd / 2), fx(x + wd / 2), fy(0.0), fy(hgt)
        if None not in (xa, xb, ya, yb):
            out.append(_rect(xa, xb, ya, yb, col, _opacity(p["alpha"])))
            obstacles.append((min(xa, xb), min(ya, yb), abs(xb - xa), abs(yb - ya)))
    return out


def _stairs(p, fx, fy, box, obstacles):
    es, vs, base = p["e"], p["v"], fy(0.0)
    if len(es) != len(vs) + 1 or base is None:
        return []
    d, open_ = [], False
    for i, v in enumerate(vs):
        xa, xb, y = fx(es[i]), fx(es[i + 1]), fy(v)
        if None in (xa, xb, y):
            if open_:
                d.append(f"V{base:.2f}")
            open_ = False
            continue
        d.append(f"V{_px(y)}H{_px(xb)}" if open_ else f"M{_px(xa)} {base:.2f}V{_px(y)}H{_px(xb)}")
        open_ = True
        obstacles.append((min(xa, xb), min(y, base), abs(xb - xa), abs(base - y)))
    if open_:
        d.append(f"V{base:.2f}")
    if not d:
        return []
    paint = (f'fill="{p["color"]}" stroke="none"' if p["fill"]
             else f'fill="none" stroke="{p["color"]}" stroke-width="{p["lw"]:g}"')
    return [f'<path d="{"".join(d)}" {paint}{_opacity(p["alpha"])}/>']


def _vlines(p, fx, fy, box, obstacles):
    d = []
    for x, lo, hi in zip(p["x"], p["lo"], p["hi"]):
        px, a, b = fx(x), fy(lo), fy(hi)
        if None not in (px, a, b):
            d.append(f"M{_px(px)} {_px(a)}V{_px(b)}")
            obstacles.append((px, min(a, b), 0, abs(b - a)))
    return [f'<path d="{"".join(d)}" stroke="{p["color"]}" stroke-width="{p["lw"]:g}"'
            f'{_opacity(p["alpha"])}/>'] if d else []


def _hvline(p, f, horizontal, box):
    v = f(p["v"])
    if v is None:
        return []
    x0, y0, w, h = box
    d = f"M{x0:.2f} {_px(v)}h{w:.2f}" if horizontal else f"M{_px(v)} {y0:.2f}v{h:.2f}"
    return [f'<path d="{d}" stroke="{p["color"]}" stroke-width="{p["lw"]:g}"{_dash(p["ls"], p["lw"])}'
            f'{_opacity(p["alpha"])}/>'] if p["ls"] else []


def _span(p, f, horizontal, box):
    a, b = f(p["lo"]), f(p["hi"])
    if a is None or b is None:
        return []
    x0, y0, w, h = box
    al = _opacity(p["alpha"])
    return [_rect(x0, x0 + w, a, b, p["color"], al) if horizontal else _rect(a, b, y0, y0 + h, p["color"], al)]


def _image(p, fx, fy, box, obstacles):
    im, out = p["im"], []
    span = (im.vmax - im.vmin) or 1.0
    for i, row in enumerate(p["rows"]):
        budget.check()
        for j, v in enumerate(row):
            if not math.isnan(v):
                c = style.cmap_color(im.cmap, (v - im.vmin) / span if math.isfinite(v) else (v > 0))
                out.append(_rect(fx(j - 0.5), fx(j + 0.5), fy(i - 0.5), fy(i + 0.5), c))
    return ['<g shape-rendering="crispEdges">', *out, "</g>"] if out else []  # no seams between cells


DRAW = {
    "line": _line, "scatter": _scatter, "bars": _bars, "stairs": _stairs, "vlines": _vlines, "image": _image,
    "hline": lambda p, fx, fy, box, o: _hvline(p, fy, True, box),
    "vline": lambda p, fx, fy, box, o: _hvline(p, fx, False, box),
    "hspan": lambda p, fx, fy, box, o: _span(p, fy, True, box),
    "vspan": lambda p, fx, fy, box, o: _span(p, fx, False, box),
}

_LOCS = [(1, 1), (0, 1), (0, 0), (1, 0), (1, 0.5), (0, 0.5), (0.5, 0), (0.5, 1), (0.5, 0.5)]  # matplotlib's order


def legend(items, fs, box, obstacles) -> list[str]:
    x0, y0, w, h = box
    pad, hl, tp, row = 0.4 * fs, 2.0 * fs, 0.8 * fs, 1.7 * fs
    lw = 2 * pad + hl + tp + max(style.text_width(s, fs) for s, _, _ in items)
    lh = 2 * pad + len(items) * row - 0.5 * fs
    gap = 0.5 * fs

    def place(loc):
        fxr, fyr = loc
        lx = x0 + gap + fxr * (w - lw - 2 * gap)
        ly = y0 + gap + (1 - fyr) * (h - lh - 2 * gap)
        return lx, ly

    def badness(lx, ly):
        return sum(1 for ox, oy, ow, oh in obstacles
                   if ox <= lx + lw and lx <= ox + ow and oy <= ly + lh and ly <= oy + oh)

    best = None
    for loc in _LOCS:
        budget.check()
        lx, ly = place(loc)
        b = badness(lx, ly)
        if best is None or b < best[0]:
            best = (b, lx, ly)
        if b == 0:
            break
    _, lx, ly = best
    out = [f'<g><rect x="{lx:.2f}" y="{ly:.2f}" width="{lw:.2f}" height="{lh:.2f}" rx="2" fill="#fff" '
           f'fill-opacity="0.8" stroke="#ccc" stroke-width="1"/>']
    for k, (s, kind, p) in enumerate(items):
        cy = ly + pad + k * row + 0.6 * fs
        hx = lx + pad
        al = _opacity(p.get("alpha"))
        if kind in ("bars", "hspan", "vspan") or (kind == "stairs" and p["fill"]):
            out.append(_rect(hx, hx + hl, cy - 0.35 * fs, cy + 0.35 * fs, p["color"], al))
        elif kind == "scatter":
            out.append(_markers([(hx + hl / 2, cy)], p["marker"], p["ms"], p["color"], al))
        else:
            ls = p.get("ls", "-")
            if ls:
                out.append(f'<path d="M{hx:.2f} {cy:.2f}h{hl:.2f}" stroke="{p["color"]}" '
                           f'stroke-width="{p["lw"]:g}"{_dash(ls, p["lw"])}{al}/>')
            if p.get("marker"):
                out.append(_markers([(hx + hl / 2, cy)], p["marker"], p["ms"], p["color"], al))
        out.append(text_el(hx + hl + tp, cy, s, fs, "left", "center"))
    out.append("</g>")
    return out
