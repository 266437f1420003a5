"""``judge.svgplot`` writes the T3 plots: well-formed, self-contained, deterministic SVG whatever
the data (NaN, inf, empty, non-positive on a log axis) and whatever the text (labels and error
messages may hold markup)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest

from judge.svgplot import Figure, save_figures, style, ticks

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = 'a</text><script>alert("x")</script> & <b>\'q\'\x00\x1b'


def _parse(svg: str) -> ET.Element:
    assert svg.startswith("<?xml")
    root = ET.fromstring(svg.encode())
    assert root.tag == f"{NS}svg"
    return root


def _texts(root) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{NS}text")]


def _line_paths(root, colour: str) -> list[str]:
    return [p.get("d") for p in root.iter(f"{NS}path") if p.get("stroke") == colour and p.get("fill") == "none"]


def _numbers(d: str) -> list[float]:
    return [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", d)]


def _demo(ys) -> str:
    fig = Figure(figsize=(6, 3))
    ax = fig.subplots(1, 2)
    ax[0].plot([0, 1, 2, 3], ys, "o-", label="curve")
    ax[0].axhline(1.0, ls="--", c="gray")
    ax[0].legend(fontsize=7)
    ax[1].bar(["a", "b"], [1.0, 2.0], color=["C1", "0.6"])
    ax[1].set_title("bars")
    fig.suptitle("demo")
    return fig.to_svg()


def test_a_figure_is_a_self_contained_svg_document():
    fig = Figure(figsize=(4, 2))
    ax = fig.subplots()
    ax.plot([1, 2, 3], [3, 1, 2])
    root = _parse(fig.to_svg())
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("288pt", "144pt", "0 0 288 144")
    tags = {el.tag.removeprefix(NS) for el in root.iter()}
    assert not tags & {"script", "image", "style", "foreignObject", "font", "font-face", "a", "use"}, tags
    assert not any(k.endswith("href") for el in root.iter() for k in el.attrib)


def test_the_same_calls_give_the_same_bytes_and_other_data_other_bytes():
    assert _demo([1.0, 2.0, 0.5, 3.0]) == _demo([1.0, 2.0, 0.5, 3.0])
    assert _demo([1.0, 2.0, 0.5, 3.0]) != _demo([1.0, 2.0, 0.5, 4.0])


def test_hostile_text_is_escaped_everywhere(tmp_path):
    fig = Figure()
    ax = fig.subplots()
    ax.plot([1, 2], [1, 2], label=HOSTILE)
    ax.set_title(HOSTILE)
    ax.set_xlabel(HOSTILE)
    ax.set_ylabel(HOSTILE)
    ax.set_xticks([1, 2], [HOSTILE, "&"])
    ax.text(1, 1, HOSTILE)
    ax.legend()
    fig.suptitle(HOSTILE)
    fig.text(0.5, 0.5, HOSTILE + "\n" + HOSTILE, wrap=True)
    fig.savefig(tmp_path / "h.svg")
    root = _parse((tmp_path / "h.svg").read_text(encoding="utf-8"))
    assert not any(el.tag == f"{NS}script" for el in root.iter())
    clean = HOSTILE.replace("\x00", "").replace("\x1b", "")
    texts = _texts(root)
    assert texts.count(clean) >= 7, texts  # title, labels, tick, text, legend, suptitle as written


def test_a_line_breaks_at_non_finite_points_and_limits_ignore_them():
    fig = Figure()
    ax = fig.subplots()
    ax.plot([0, 1, 2, 3, 4, 5], [1.0, 2.0, math.nan, 4.0, math.inf, 5.0], color="C2")
    lo, hi = ax.get_ylim()
    assert 0.5 < lo < 1.0 and 5.0 < hi < 5.5, (lo, hi)
    root = _parse(fig.to_svg())
    (d,) = _line_paths(root, style.CYCLE[2])
    assert d.count("M") == 3 and d.count("L") == 1, d  # [1, 2], [4] alone, [5] alone
    assert "nan" not in fig.to_svg() and "inf" not in fig.to_svg()


@pytest.mark.parametrize("ys", [[], [math.nan, math.nan], [math.inf, -math.inf]])
def test_empty_or_unplottable_data_still_gives_a_figure(ys):
    fig = Figure()
    ax = fig.subplots()
    ax.plot(list(range(len(ys))), ys, label="nothing")
    ax.bar(list(range(len(ys))), ys)
    ax.scatter(ys, ys)
    ax.vlines(ys, ys, ys)
    ax.stairs(ys, [0.0] + ys)
    ax.legend()
    assert ax.get_ylim() == (0.0, 1.0)
    root = _parse(fig.to_svg())
    assert "nothing" in _texts(root)


def test_a_log_axis_drops_non_positive_values_and_ticks_at_decades():
    fig = Figure()
    ax = fig.subplots()
    ax.semilogy([0, 1, 2, 3, 4], [0.0, -1.0, 1e-3, 0.1, 10.0], "k-")
    lo, hi = ax.get_ylim()
    assert 5e-4 < lo < 1e-3 and 10.0 < hi < 20.0, (lo, hi)
    root = _parse(fig.to_svg())
    assert {"0.001", "0.01", "0.1", "1", "10"} <= set(_texts(root))
    (d,) = _line_paths(root, "#000000")
    assert d.count("M") == 1 and len(_numbers(d)) == 6, d  # three points: the two non-positive dropped


def test_lines_stay_inside_the_plot_area_and_are_clipped_to_it():
    fig = Figure(figsize=(5, 3))
    ax = fig.subplots()
    ax.plot([0, 1, 2], [0.0, 10.0, 5.0], color="C0")
    ax.plot([0, 2], [-100.0, 100.0], color="C1")
    ax.set_ylim(0, 10)
    root = _parse(fig.to_svg())
    clip = root.find(f".//{NS}clipPath/{NS}rect")
    x0, y0 = float(clip.get("x")), float(clip.get("y"))
    x1, y1 = x0 + float(clip.get("width")), y0 + float(clip.get("height"))
    (d,) = _line_paths(root, style.CYCLE[0])
    nums = _numbers(d)
    assert all(x0 - 0.01 <= x <= x1 + 0.01 and y0 - 0.01 <= y <= y1 + 0.01 for x, y in zip(nums[::2], nums[1::2]))
    group = next(g for g in root.iter(f"{NS}g") if g.get("clip-path"))
    assert group.get("clip-path") == f"url(#{root.find(f'.//{NS}clipPath').get('id')})"
    assert any(p.get("stroke") == style.CYCLE[1] for p in group.iter(f"{NS}path"))  # the steep line: clipped


@pytest.mark.parametrize("lo, hi, nbins, expected", [
    (0.0, 1.0, 5, ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]),
    (-0.35, 0.35, 5, ["-0.2", "0.0", "0.2"]),
    (0.0, 1.05, 5, ["0.00", "0.25", "0.50", "0.75", "1.00"]),
    (0.0, 150.0, 5, ["0", "50", "100", "150"]),
    (0.0, 1e-5, 5, ["0", "2e-6", "4e-6", "6e-6", "8e-6", "1e-5"]),
    (0.8, 1.2, 5, ["0.8", "0.9", "1.0", "1.1", "1.2"]),
])
def test_linear_ticks_are_nice_steps_with_compact_labels(lo, hi, nbins, expected):
    vals, step = ticks.linear_ticks(lo, hi, nbins)
    assert [ticks.label(v, step) for v in vals] == expected


@pytest.mark.parametrize("lo, hi, expected", [
    (1e-3, 10.0, ["0.001", "0.01", "0.1", "1", "10"]),
    (0.09, 5.5, ["0.1", "0.2", "0.5", "1", "2", "5"]),
    (1e-12, 1e12, ["1e-10", "1e-5", "1", "1e5", "1e10"]),
    (0.3, 0.6, ["0.3", "0.4", "0.5", "0.6"]),
])
def test_log_ticks_are_decades_or_1_2_5_within_a_decade(lo, hi, expected):
    assert [ticks.label(v) for v in ticks.log_ticks(lo, hi, 5)] == expected


def test_limits_have_margins_except_at_a_bars_baseline():
    assert ticks.auto_limits(0.0, 10.0, False) == pytest.approx((-0.5, 10.5))
    assert ticks.auto_limits(0.0, 10.0, False, sticky=[0.0]) == pytest.approx((0.0, 10.5))
    assert ticks.auto_limits(3.0, 3.0, False) == pytest.approx((2.85, 3.15))
    assert ticks.auto_limits(None, None, True) == (1.0, 10.0)


def test_the_legend_lists_labelled_series_where_the_data_is_not():
    fig = Figure(figsize=(5, 3))
    ax = fig.subplots()
    ax.plot([0.8, 0.9, 1.0], [0.8, 0.9, 1.0], "o", label="upper right")
    ax.plot([0.0, 0.1], [0.0, 0.1], label="_hidden")
    ax.bar([0.5], [0.2], label="bar")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    root = _parse(fig.to_svg())
    legend = next(g for g in root.iter(f"{NS}g") if g.find(f"{NS}rect") is not None and g.get("clip-path") is None
                  and g.find(f"{NS}rect").get("fill-opacity") == "0.8")
    assert _texts(legend) == ["upper right", "bar"]
    clip = root.find(f".//{NS}clipPath/{NS}rect")
    box = legend.find(f"{NS}rect")
    assert float(box.get("x")) < float(clip.get("x")) + float(clip.get("width")) / 2  # not the upper right
    assert float(box.get("y")) < float(clip.get("y")) + float(clip.get("height")) / 2  # but still at the top


def test_imshow_and_colorbar_draw_cells_in_the_colormap():
    fig = Figure(figsize=(6, 3))
    axes = fig.subplots(1, 2)
    im = axes[0].imshow([[-1.0, 0.0], [1.0, math.nan], [math.inf, 0.5]], cmap="coolwarm", vmin=-1, vmax=1)
    axes[0].set_yticks([0, 1, 2], ["r0", "r1", "r2"])
    axes[1].imshow([])
    fig.colorbar(im, ax=axes, shrink=0.8)
    root = _parse(fig.to_svg())
    cells = [r.get("fill") for g in root.iter(f"{NS}g") if g.get("shape-rendering") == "crispEdges"
             for r in g.iter(f"{NS}rect")]
    assert cells == ["#3b4cc0", "#dddcdc", "#b40426", "#b40426", "#f4987a"]  # NaN skipped, +inf at the top
    assert root.find(f".//{NS}linearGradient") is not None
    assert {"r0", "r1", "r2", "-0.5", "0.0", "0.5"} <= set(_texts(root))


def test_save_figures_saves_a_figure_saying_what_could_not_be_drawn(tmp_path):
    def good(fig, m):
        fig.subplots().plot(m["y"])

    def bad(fig, m):
        fig.subplots().plot(m["y"])
        raise ValueError(HOSTILE)

    names = save_figures(tmp_path, {"y": [1.0, 2.0]}, [("good.svg", (3, 2), good), ("bad.svg", (3, 2), bad)])
    assert names == ["good.svg", "bad.svg"]
    assert "could not draw" not in (tmp_path / "good.svg").read_text()
    root = _parse((tmp_path / "bad.svg").read_text())
    text = " ".join(_texts(root))
    assert "could not draw bad.svg:" in text and "ValueError" in text and "<script>" in text
    assert root.find(f".//{NS}clipPath") is None  # the half-drawn panel was cleared


@pytest.mark.parametrize("spec, expected", [("C1", "#ff7f0e"), ("tab:red", "#d62728"), ("0.5", "#808080"),
                                            ("k", "#000000"), ("#ABCDEF", "#abcdef"), ((1, 0, 0), "#ff0000")])
def test_colours_follow_matplotlibs_names(spec, expected):
    assert style.color(spec) == expected


@pytest.mark.parametrize("bad", ["chartreuse-ish", "1.5", "C"])
def test_an_unknown_colour_is_an_error(bad):
    with pytest.raises(ValueError):
        style.color(bad)


@pytest.mark.parametrize("fmt, expected", [("o-", ("o", "-", None)), ("s--", ("s", "--", None)),
                                           ("k:", (None, ":", "k")), ("rx", ("x", "", "r")),
                                           ("C3-.", (None, "-.", "C3")), ("", (None, None, None))])
def test_format_strings_split_like_matplotlibs(fmt, expected):
    assert style.parse_fmt(fmt) == expected


def test_drawing_past_its_time_budget_saves_a_placeholder_figure_instead(tmp_path):
    from judge.svgplot import BudgetExceeded, time_budget

    many = list(range(200_000))  # a wrong answer's shape turned into a line of 200k points

    def draw(fig, m):
        ax = fig.subplots()
        ax.plot(m["x"], m["x"], "o-", label="yours")
        ax.legend(fontsize=7)

    with time_budget(0.0):  # already spent: the first look at the clock stops the drawing
        with pytest.raises(BudgetExceeded, match="0 s budget"):
            draw(Figure(), {"x": many})
        names = save_figures(tmp_path, {"x": many}, [("a.svg", (4, 3), draw), ("b.svg", (4, 3), draw)])
    assert names == ["a.svg", "b.svg"]
    for name in names:
        svg = (tmp_path / name).read_text()
        assert "could not draw" in svg and "budget" in svg and len(svg) < 4000
        _parse(svg)
    save_figures(tmp_path, {"x": many[:50]}, [("c.svg", (4, 3), draw)])  # no budget: drawn
    assert "could not draw" not in (tmp_path / "c.svg").read_text()
