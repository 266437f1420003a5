"""A small SVG plotting library for the T3 plots: matplotlib's calls, a fraction of its cost.

Every submission's plots are drawn by the service, so drawing them is CPU spent per submission.
matplotlib spent 30-80 ms a grading on them; this writes the same kind of figure as SVG text
directly (~1-3 ms), with no dependency. It covers what the exercises' ``plot`` functions call:

    from judge.svgplot import Figure
    fig = Figure(figsize=(8, 3))
    ax = fig.subplots(1, 2)
    ax[0].plot(xs, ys, "o-", label="yours"); ax[0].semilogy(...); ax[1].bar(...)
    ax[0].legend(fontsize=7)
    fig.savefig(out / "plot.svg")

What it writes is deterministic (same calls, same bytes), well-formed and self-contained (text
stays text, no scripts or external references). Non-finite data never breaks a figure: a line
breaks at a NaN, limits come from the finite data, a log axis drops non-positive values.
``save_figures`` draws each figure of an experiment and falls back to a figure saying what could
not be drawn, also when the drawing runs past its ``time_budget``. Modules: ``figure`` (layout,
document), ``axes`` (panels: calls, limits, ticks placed), ``marks`` (each mark as SVG, the
legend), ``ticks`` (limits, tick values, labels), ``style``, ``budget`` (the drawing's deadline).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from judge.svgplot.axes import Axes, Image
from judge.svgplot.budget import BudgetExceeded, time_budget
from judge.svgplot.figure import Figure

__all__ = ["Axes", "BudgetExceeded", "Figure", "Image", "save_figures", "time_budget"]


def save_figures(out_dir, metrics: dict,
                 figures: Iterable[tuple[str, tuple[float, float], Callable[[Figure, dict], None]]]) -> list[str]:
    """For each ``(name, figsize, draw)``: ``draw(fig, metrics)`` on a new Figure and save it as
    ``out_dir/name``; when drawing fails (a wrong solution's odd metrics) save instead a figure
    saying what could not be drawn and why. Returns the names written."""
    out, written = Path(out_dir), []
    for name, size, draw in figures:
        fig = Figure(figsize=size)
        try:
            draw(fig, metrics)
            svg = fig.to_svg()
        except Exception as e:  # noqa: BLE001 - odd metrics (a wrong solution's) still get a figure
            fig.clf()
            fig.text(0.5, 0.5, f"could not draw {name}:\n{type(e).__name__}: {e}", ha="center", va="center",
                     fontsize=8, wrap=True)
            svg = fig.to_svg()
        (out / name).write_text(svg, encoding="utf-8")
        written.append(name)
    return written
