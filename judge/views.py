"""T3 plots as Vega-Lite views of the metrics: the learner's data beside the reference's.

An exercise declares each plot as a Vega-Lite v6 spec, ``exercises/<slug>/views/<name>.vl.json``
(trusted: written by the author). Its marks read named datasets (``"data": {"name": "curves"}``),
and ``usermeta.judge.datasets`` says how each dataset is made from the T3 metrics: a list of parts,
each a table whose columns are paths into the metrics::

    "usermeta": {"judge": {"datasets": {"curves": [
        {"const": {"series": "GRPO"}, "columns": {"iteration": "#0", "p": "p_best[#0]"}},
        {"const": {"series": "no std"}, "columns": {"iteration": "#0", "p": "nostd_p_best[#0]"}}
    ]}}}

A path is dotted keys into the metrics (``old.clip_frac``), each ``[#k]`` indexing a list by the
row's position along dimension ``k`` (``[#k+1]``: the next entry, e.g. a bin's upper edge);
``"#k"`` alone is that position. A part has one row per position: dimension ``k`` runs over the
list that the part's first column indexed by ``#k`` has there (so put the longest-lived list
first; another column shorter than it gives nulls). ``const`` columns are the
author's (strings allowed); every other value comes from the metrics and lands in the spec as a
number or null (NaN, inf, a string, a missing entry: null, and counted). Each row also gets
``source``: ``"yours"`` or ``"reference"`` (the reference's metrics, computed once per process),
so a view can colour or facet by it.

``bind`` makes the spec of one grading: the author's spec with the light theme's ``config``, the
datasets inline under ``datasets`` (so the file renders anywhere), and ``usermeta.judge.nulls``.
Submission values reach only ``datasets``: never marks, titles or expressions. Rendering (SVG,
PNG, report.html) is ``judge.views_render``, in the judge's process only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from pathlib import Path
from typing import Any

import orjson

from judge.errors import ExerciseError

SUFFIX = ".vl.json"  # a view's file name ends so; the artifact keeps the name
SOURCES = ("yours", "reference")  # the values of the ``source`` column, in legend order
MAX_ROWS = 20_000  # rows of one dataset from one source at most (a wrong shape's data is cut)
SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"

# Okabe & Ito's colour-blind-safe palette: yours blue, the reference orange, then the rest.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
LIGHT = {"background": "#ffffff", "range": {"category": PALETTE},
         "axis": {"labelFontSize": 11, "titleFontSize": 12}, "legend": {"labelFontSize": 11},
         "title": {"fontSize": 13}}
DARK = {"background": "#1e1e1e", "range": {"category": ["#56B4E9", "#E69F00", "#009E73", "#CC79A7",
                                                       "#0072B2", "#D55E00", "#F0E442", "#ffffff"]},
        "title": {"color": "#e6e6e6", "subtitleColor": "#c8c8c8", "fontSize": 13},
        "axis": {"domainColor": "#a0a0a0", "gridColor": "#3a3a3a", "tickColor": "#a0a0a0",
                 "labelColor": "#d0d0d0", "titleColor": "#e6e6e6", "labelFontSize": 11, "titleFontSize": 12},
        "legend": {"labelColor": "#d0d0d0", "titleColor": "#e6e6e6", "labelFontSize": 11},
        "header": {"labelColor": "#d0d0d0", "titleColor": "#e6e6e6"},
        "view": {"stroke": "#555555"}, "text": {"color": "#e6e6e6"}, "rule": {"color": "#a0a0a0"}}
THEMES = {"light": LIGHT, "dark": DARK}

_PATH = re.compile(r"^(?P<keys>[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)(?P<dims>(?:\[#\d(?:\+\d)?\])*)$")
_DIM = re.compile(r"\[#(\d)(?:\+(\d))?\]")
_INDEX = re.compile(r"^#(\d)$")
_MISSING = object()


@dataclass(frozen=True)
class Column:
    """One column of a part: an index (``#k``) or a path into the metrics."""

    field: str  # the column's name in the rows
    index: int | None  # k for "#k" (the row's position along dimension k), else None
    keys: tuple[str, ...] = ()  # the dotted keys into the metrics
    dims: tuple[int, ...] = ()  # the dimensions indexing the value, in order ([#0][#1] -> (0, 1))
    shifts: tuple[int, ...] = ()  # added to each position ([#0+1] -> dims (0,), shifts (1,))


@dataclass(frozen=True)
class Part:
    """One table of a dataset: constant columns and columns from the metrics."""

    const: tuple[tuple[str, Any], ...]  # the author's columns, the same in every row
    columns: tuple[Column, ...]  # the columns from the metrics (and the positions)
    ndim: int  # how many dimensions the rows run over (0: one row)


@dataclass(frozen=True)
class View:
    """A view file of an exercise, parsed."""

    name: str  # the file's stem before .vl.json, e.g. "bandit"
    template: dict  # the author's spec without usermeta.judge
    datasets: tuple[tuple[str, tuple[Part, ...]], ...]  # dataset name -> its parts

    @property
    def file_name(self) -> str:
        return self.name + SUFFIX


def _column(where: str, field: str, path: Any) -> Column:
    if not isinstance(path, str):
        raise ExerciseError(f"{where}: column {field!r} must be a path string, got {path!r}")
    m = _INDEX.match(path)
    if m:
        return Column(field, int(m.group(1)))
    m = _PATH.match(path)
    if not m:
        raise ExerciseError(f"{where}: column {field!r}: {path!r} is not a path (keys.like.this[#0][#1] or #k)")
    found = _DIM.findall(m.group("dims"))
    return Column(field, None, tuple(m.group("keys").split(".")), tuple(int(d) for d, _ in found),
                  tuple(int(k or 0) for _, k in found))


def _part(where: str, raw: Any) -> Part:
    if not isinstance(raw, dict) or set(raw) - {"const", "columns"} or "columns" not in raw:
        raise ExerciseError(f"{where}: a part is {{\"columns\": {{...}}, \"const\": {{...}}}}, got {raw!r}")
    const = raw.get("const", {})
    if not isinstance(const, dict) or not all(isinstance(v, (str, int, float)) for v in const.values()):
        raise ExerciseError(f"{where}: const must map column names to strings or numbers")
    cols = tuple(_column(where, f, p) for f, p in raw["columns"].items())
    used = {c.index for c in cols if c.index is not None} | {d for c in cols for d in c.dims}
    ndim = max(used) + 1 if used else 0
    if used != set(range(ndim)):
        raise ExerciseError(f"{where}: dimensions {sorted(used)} skip one (use #0, #1, ... in order)")
    return Part(tuple(const.items()), cols, ndim)


def parse_view(path: Path) -> View:
    """A view file, checked for what the judge reads of it (the rest is Vega-Lite's)."""
    try:
        spec = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        raise ExerciseError(f"{path}: not a JSON view: {e}") from e
    if not isinstance(spec, dict):
        raise ExerciseError(f"{path}: a view is a JSON object (a Vega-Lite spec)")
    for key in ("title", "description"):
        if not spec.get(key):
            raise ExerciseError(f"{path}: a view needs a {key} (accessibility: say what it shows)")
    judge = (spec.get("usermeta") or {}).get("judge") or {}
    raw = judge.get("datasets")
    if not isinstance(raw, dict) or not raw:
        raise ExerciseError(f"{path}: usermeta.judge.datasets must name the datasets the view reads")
    datasets = []
    for name, parts in raw.items():
        if not isinstance(parts, list) or not parts:
            raise ExerciseError(f"{path}: dataset {name!r} must be a non-empty list of parts")
        datasets.append((name, tuple(_part(f"{path}: dataset {name!r}", p) for p in parts)))
    template = {k: v for k, v in spec.items() if k not in ("usermeta", "datasets")}
    template.setdefault("$schema", SCHEMA)
    return View(path.name[:-len(SUFFIX)], template, tuple(datasets))


@lru_cache(maxsize=256)
def _views_at(folder: str, stamp: tuple) -> tuple[View, ...]:
    return tuple(parse_view(p) for p in sorted(Path(folder).glob("*" + SUFFIX)))


def exercise_views(root: Path) -> tuple[View, ...]:
    """The views of the exercise at ``root`` (its ``views/*.vl.json``), parsed once per version."""
    folder = Path(root) / "views"
    if not folder.is_dir():
        return ()
    stamp = tuple((p.name, p.stat().st_mtime_ns) for p in sorted(folder.glob("*" + SUFFIX)))
    return _views_at(str(folder), stamp)


def _lookup(metrics: Any, keys: tuple[str, ...]) -> Any:
    v = metrics
    for k in keys:
        if isinstance(v, dict) and k in v:
            v = v[k]
        elif isinstance(v, (list, tuple)) and k.isdigit() and int(k) < len(v):
            v = v[int(k)]
        else:
            return _MISSING
    return v


def _at(v: Any, dims: tuple[int, ...], shifts: tuple[int, ...], pos: tuple[int, ...]) -> Any:
    for d, k in zip(dims, shifts):
        if not isinstance(v, (list, tuple)) or pos[d] + k >= len(v):
            return _MISSING
        v = v[pos[d] + k]
    return v


class _Counter:
    """Values that were not finite numbers (drawn as gaps), and whether rows were cut."""

    def __init__(self):
        self.nulls = 0
        self.cut = False


def _number(v: Any, count: _Counter) -> float | int | None:
    t = type(v)
    if t is int:
        return v
    if t is float:
        if math.isfinite(v):
            return v
    elif t is bool:
        return int(v)
    count.nulls += 1
    return None


def _extent(values: list[tuple[Column, Any]], dim: int, pos: tuple[int, ...]) -> int:
    """How far dimension ``dim`` runs at ``pos`` (its first ``dim`` positions): the length of the
    list that the first column indexing ``dim`` (after dimensions already placed) has there."""
    for col, base in values:
        if dim not in col.dims:
            continue
        i = col.dims.index(dim)
        if any(d >= dim for d in col.dims[:i]):
            continue  # indexed by a later dimension first: its extent comes from the others
        v = _at(base, col.dims[:i], col.shifts[:i], pos) if base is not _MISSING else base
        return max(0, len(v) - col.shifts[i]) if isinstance(v, (list, tuple)) else 0
    return 0


def _numbers(seq: Any, start: int, n: int, count: _Counter) -> list:
    """``seq[start:start + n]`` as numbers or nulls, padded with nulls to ``n`` (all counted)."""
    got = seq[start:start + n] if isinstance(seq, (list, tuple)) else ()
    vals = [x if (type(x) is int or (type(x) is float and x - x == 0.0)) else _number(x, count) for x in got]
    if len(vals) < n:
        count.nulls += n - len(vals)
        vals += [None] * (n - len(vals))
    return vals


def _rows_1d(part: Part, values: list, base_row: dict, out: list, count: _Counter) -> None:
    """``part_rows`` for a part over one dimension (most are): column by column, then zipped."""
    n = _extent(values, 0, ())
    if len(out) + n > MAX_ROWS:
        n, count.cut = max(0, MAX_ROWS - len(out)), True
    fields, columns, bases = [], [], {c.field: base for c, base in values}
    for c in part.columns:
        fields.append(c.field)
        if c.index is not None:
            columns.append(range(n))
            continue
        base = bases[c.field]
        if c.dims:
            columns.append(_numbers(base, c.shifts[0], n, count) if base is not _MISSING else _numbers((), 0, n, count))
        else:
            v = _number(base, count) if base is not _MISSING else _number(None, count)
            if n > 1 and v is None:
                count.nulls += n - 1
            columns.append([v] * n)
    keys = (*base_row, *fields)
    columns[:0] = [repeat(v, n) for v in base_row.values()]
    out.extend(map(dict, map(zip, repeat(keys), zip(*columns))))


def part_rows(part: Part, metrics: Any, source: str, out: list, count: _Counter) -> None:
    """Append ``part``'s rows from ``metrics`` to ``out`` (at most ``MAX_ROWS`` in ``out``)."""
    base_row = dict(part.const)
    base_row["source"] = source
    values = [(c, _lookup(metrics, c.keys)) for c in part.columns if c.index is None]
    if part.ndim == 1 and all(c.dims in ((), (0,)) for c, _ in values):
        _rows_1d(part, values, base_row, out, count)
        return

    def emit(pos: tuple[int, ...]) -> None:
        if len(out) >= MAX_ROWS:
            count.cut = True
            return
        row = dict(base_row)
        for c in part.columns:
            if c.index is not None:
                row[c.field] = pos[c.index]
        for c, base in values:
            row[c.field] = _number(_at(base, c.dims, c.shifts, pos) if base is not _MISSING else base, count)
        out.append(row)

    def walk(pos: tuple[int, ...]) -> None:
        dim = len(pos)
        if dim == part.ndim:
            emit(pos)
            return
        for i in range(_extent(values, dim, pos)):
            if len(out) >= MAX_ROWS:
                count.cut = True
                return
            walk(pos + (i,))

    walk(())


def dataset_rows(view: View, metrics: Any, source: str) -> tuple[dict[str, list], _Counter]:
    """Each dataset of ``view`` made from ``metrics`` with ``source`` in every row."""
    count = _Counter()
    out = {}
    for name, parts in view.datasets:
        rows: list = []
        for part in parts:
            part_rows(part, metrics, source, rows, count)
        out[name] = rows
    return out, count


def _spec(view: View, theme: str, count: _Counter) -> dict:
    spec = dict(view.template)
    config = dict(THEMES[theme])
    config.update(view.template.get("config") or {})
    spec["config"] = config
    spec["usermeta"] = {"judge": {"nulls": count.nulls, "cut": count.cut}}
    return spec


def bind(view: View, mine: Any, reference: dict[str, list] | None, theme: str = "light") -> tuple[dict, _Counter]:
    """The spec of ``view`` with the learner's datasets (from ``mine``, the metrics) and the
    reference's rows (``dataset_rows(view, ref_metrics, "reference")[0]``)."""
    rows, count = dataset_rows(view, mine, SOURCES[0])
    spec = _spec(view, theme, count)
    ref = reference or {}
    spec["datasets"] = {name: rows[name] + ref.get(name, []) for name, _ in view.datasets}
    return spec, count


def bind_json(view: View, mine: Any, reference: dict[str, bytes] | None) -> tuple[bytes, _Counter]:
    """``dumps(bind(...)[0])`` with the reference's rows already serialised (``reference_json``):
    each grading serialises only its own rows."""
    rows, count = dataset_rows(view, mine, SOURCES[0])
    spec = _spec(view, "light", count)
    ref = reference or {}
    merged = {}
    for name, _ in view.datasets:
        own, theirs = dumps(rows[name]), ref.get(name, b"[]")
        if own == b"[]" or theirs == b"[]":
            merged[name] = orjson.Fragment(theirs if own == b"[]" else own)
        else:
            merged[name] = orjson.Fragment(own[:-1] + b"," + theirs[1:])
    spec["datasets"] = merged
    return dumps(spec), count


def themed(spec: dict, theme: str) -> dict:
    """``spec`` with ``theme``'s config in place of the one it was bound with."""
    if theme not in THEMES:
        raise ValueError(f"theme must be one of {sorted(THEMES)}, got {theme!r}")
    return {**spec, "config": dict(THEMES[theme])}


def dumps(value: Any) -> bytes:
    """JSON bytes (NaN/inf as null; keys that are not strings as strings; other objects as text)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY, default=str)


def reference_rows(view: View, exercise: Any) -> dict[str, list]:
    """The reference's rows of ``view``, once per process (the reference's T3 metrics are the
    same ``experiment.run(ref, None)`` the T3 tests memoise under ``(slug, "t3")``)."""
    from judge.testing import memo

    def make():
        metrics = memo((exercise.slug, "t3"), lambda: exercise.experiment.run(exercise.ref, None))
        return dataset_rows(view, metrics, SOURCES[1])[0]

    return memo((exercise.slug, "views", view.name, str(exercise.root)), make)


def reference_json(view: View, exercise: Any) -> dict[str, bytes]:
    """``reference_rows`` serialised, once per process."""
    from judge.testing import memo

    return memo((exercise.slug, "views-json", view.name, str(exercise.root)),
                lambda: {name: dumps(rows) for name, rows in reference_rows(view, exercise).items()})


def write(views: tuple[View, ...], mine: Any, out_dir: Path, reference: Any = None) -> tuple[list[str], list[str]]:
    """Write ``metrics.json`` and each view's spec into ``out_dir``; ``reference``: a callable
    view -> the reference's serialised rows (``reference_json``), or None (the learner's data alone). Returns (the names written,
    problems to tell the learner)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_bytes(orjson.dumps(mine, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
                                                    | orjson.OPT_SERIALIZE_NUMPY, default=str))
    names, problems, nulls, cut = ["metrics.json"], [], 0, []
    for view in views:
        data, count = bind_json(view, mine, reference(view) if reference else None)
        (out / view.file_name).write_bytes(data)
        names.append(view.file_name)
        nulls += count.nulls
        if count.cut:
            cut.append(view.name)
    if nulls:
        problems.append(f"{nulls} value(s) your experiment produced for the plots are not finite numbers "
                        f"(NaN, inf or missing): the plots show them as gaps")
    if cut:
        problems.append(f"the plots {', '.join(cut)} show only the first {MAX_ROWS:,} points of a dataset: "
                        f"your metrics have far more entries than the toy's")
    return names, problems


def save(experiment_file: str | Path, metrics: Any, out_dir: str | Path) -> list[str]:
    """For an exercise's ``experiment.py`` run by hand (``--out``): ``metrics.json`` and its views
    with your data alone (``judge local`` adds the reference's and draws them). Returns the names."""
    views = exercise_views(Path(experiment_file).resolve().parent)
    return write(views, metrics, Path(out_dir))[0]
