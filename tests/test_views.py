"""``judge.views``: each exercise's T3 plots are Vega-Lite v6 views of its metrics, the
submission's data beside the reference's, with untrusted values only in ``datasets``."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import orjson
import pytest

from judge import views, views_render
from judge.errors import ExerciseError
from judge.exercise import discover
from judge.grading import grade

EXERCISES = discover()
SLUGS = sorted(EXERCISES)


@pytest.fixture(scope="module")
def validator():
    """The Vega-Lite v6 JSON schema as altair ships it (no network)."""
    import altair
    import jsonschema

    schema = Path(altair.__file__).parent / "vegalite" / "v6" / "schema" / "vega-lite-schema.json"
    return jsonschema.Draft7Validator(json.loads(schema.read_text()))


def _walk(node, found):
    """Every dict in a spec, depth first."""
    if isinstance(node, dict):
        found.append(node)
        for v in node.values():
            _walk(v, found)
    elif isinstance(node, list):
        for v in node:
            _walk(v, found)
    return found


def _ref_metrics(ex):
    from judge.testing import memo

    return memo((ex.slug, "t3"), lambda: ex.experiment.run(ex.ref, None))


@pytest.mark.parametrize("slug", SLUGS)
def test_every_exercise_declares_its_plots_as_views(slug):
    ex = EXERCISES[slug]
    found = views.exercise_views(ex.root)
    assert found, f"{slug} has no views/*.vl.json"
    for view in found:
        t = view.template
        assert t["$schema"] == views.SCHEMA and t["title"] and len(t["description"]) > 40
        declared = {name for name, _ in view.datasets}
        used = {d["data"]["name"] for d in _walk(t, []) if isinstance(d.get("data"), dict) and "name" in d["data"]}
        assert used == declared, f"{slug}/{view.name}: datasets used {used}, declared {declared}"
        for enc in (d["encoding"] for d in _walk(t, []) if isinstance(d.get("encoding"), dict)):
            for channel in ("x", "y"):
                e = enc.get(channel)
                if isinstance(e, dict) and e.get("type") == "quantitative" and "field" in e:  # units said
                    assert "(" in e.get("title", "") and e["title"].endswith(")"), (slug, view.name, e)
        tells = [d for d in _walk(t, []) if d.get("field") == "source" or "datum.source" in str(d.get("calculate", ""))]
        assert tells, f"{slug}/{view.name}: nothing tells yours from the reference's (a field or facet of source)"


@pytest.mark.parametrize("slug", SLUGS)
def test_bound_views_are_valid_vega_lite_v6(slug, validator):
    ex = EXERCISES[slug]
    ref = _ref_metrics(ex)
    for view in views.exercise_views(ex.root):
        spec, count = views.bind(view, ref, views.reference_rows(view, ex))
        errors = [f"{list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(spec)]
        assert errors == [], f"{slug}/{view.name}: {errors[:3]}"
        assert count.nulls == 0 and not count.cut  # the reference's metrics are all finite numbers
        assert orjson.loads(views.bind_json(view, ref, views.reference_json(view, ex))[0]) == spec
        for theme in ("light", "dark"):
            assert validator.is_valid(views.themed(spec, theme))


_NUDGE = '''

import torch as _torch_nudge


def _nudged(fn):
    def call(*args, **kwargs):
        out = fn(*args, **kwargs)
        if isinstance(out, _torch_nudge.Tensor) and out.is_floating_point():
            return out * 1.05
        if isinstance(out, tuple):
            return tuple(o * 1.05 if isinstance(o, _torch_nudge.Tensor) and o.is_floating_point() else o
                         for o in out)
        return out
    return call


for _name in {names!r}:
    globals()[_name] = _nudged(globals()[_name])
'''


def _apart(yours, reference) -> int:
    """How many numbers differ between rows in the same place of the two sources' tables."""
    n = 0
    for y, r in zip(yours, reference):
        for field, v in y.items():
            w = r.get(field)
            if isinstance(v, float) and isinstance(w, float) and not math.isclose(v, w, rel_tol=1e-6, abs_tol=1e-9):
                n += 1
    return n


@pytest.mark.parametrize("slug", SLUGS)
def test_t3_writes_views_of_the_submission_beside_the_reference(slug, tmp_path):
    """A wrong submission (every floating output 5% too large) graded on T3: each view's "yours"
    rows are the submission's metrics (metrics.json), its "reference" rows the reference's, and
    the two differ somewhere: the learner sees both curves apart."""
    ex = EXERCISES[slug]
    source = ex.solution_path.read_text() + _NUDGE.format(names=ex.function_names)
    verdict = grade(ex, source, sandbox=None, mode="run", tiers=["T3"], out_dir=tmp_path, diagnose=False)
    names = {a.name for a in verdict.artifacts}
    found = views.exercise_views(ex.root)
    assert names == {"metrics.json"} | {v.file_name for v in found}, names
    mine = json.loads((tmp_path / "metrics.json").read_text())
    ref = _ref_metrics(ex)
    apart = 0
    for view in found:
        spec = json.loads((tmp_path / view.file_name).read_text())
        assert {k: v for k, v in spec.items() if k not in ("datasets", "config", "usermeta")} == view.template
        for name, _ in view.datasets:
            rows = spec["datasets"][name]
            assert [r for r in rows if r["source"] == "yours"] == views.dataset_rows(view, mine, "yours")[0][name]
            assert [r for r in rows if r["source"] == "reference"] == views.dataset_rows(view, ref, "reference")[0][name]
            apart += _apart([r for r in rows if r["source"] == "yours"], [r for r in rows if r["source"] == "reference"])
    assert apart > 0, f"{slug}: the nudged submission's views show the reference's numbers"
    t3 = next(t for t in verdict.tiers if t.tier == "T3")
    assert t3.status == "failed", f"{slug}: T3 accepted outputs 5% off ({t3})"


def _view(tmp_path, datasets, **extra):
    spec = {"$schema": views.SCHEMA, "title": "t", "description": "a test view",
            "usermeta": {"judge": {"datasets": datasets}},
            "layer": [{"data": {"name": n}, "mark": "line", "encoding": {"x": {"field": "x", "type": "quantitative"}}}
                      for n in datasets], **extra}
    (tmp_path / "v.vl.json").write_text(json.dumps(spec))
    return views.parse_view(tmp_path / "v.vl.json")


def test_paths_positions_shifts_and_ragged_lists(tmp_path):
    view = _view(tmp_path, {
        "one": [{"const": {"s": "a"}, "columns": {"i": "#0", "y": "ys[#0]", "c": "scale"}}],
        "bins": [{"columns": {"n": "counts[#0]", "lo": "edges[#0]", "hi": "edges[#0+1]"}}],
        "grid": [{"columns": {"k": "ks[#0]", "j": "#1", "v": "m.rows[#0][#1]"}}]})
    metrics = {"ys": [1.0, 2, True], "scale": 0.5, "counts": [3, 4], "edges": [0.0, 1.0, 2.0],
               "ks": [10, 20], "m": {"rows": [[1.0, 2.0, 3.0], [4.0]]}}
    rows, count = views.dataset_rows(view, metrics, "yours")
    assert rows["one"] == [{"s": "a", "source": "yours", "i": i, "y": y, "c": 0.5} for i, y in enumerate([1.0, 2, 1])]
    assert rows["bins"] == [{"source": "yours", "n": 3, "lo": 0.0, "hi": 1.0}, {"source": "yours", "n": 4, "lo": 1.0, "hi": 2.0}]
    assert [(r["k"], r["j"], r["v"]) for r in rows["grid"]] == [(10, 0, 1.0), (10, 1, 2.0), (10, 2, 3.0), (20, 0, 4.0)]
    assert count.nulls == 0


def test_untrusted_values_stay_numbers_in_data_and_are_counted(tmp_path):
    view = _view(tmp_path, {"d": [{"const": {"s": "mine"}, "columns": {"i": "#0", "y": "ys[#0]", "z": "zs[#0]",
                                                                       "w": "gone.deep"}}]})
    hostile = ["</script><script>alert(1)</script>", float("nan"), float("inf"), -float("inf"), {"x": 1}, [1.0],
               None, 2.5]
    metrics = {"ys": hostile, "zs": [1.0], "title": "<b>pwned</b>", "mark": "text"}
    spec, count = views.bind(view, metrics, {"d": [{"source": "reference", "s": "mine", "i": 0, "y": 1.0}]})
    rows = spec["datasets"]["d"]
    yours = [r for r in rows if r["source"] == "yours"]
    assert [r["y"] for r in yours] == [None] * 7 + [2.5]
    # 7 bad ys, 7 missing zs (the list is shorter), 8 missing "gone.deep"
    assert count.nulls == 7 + 7 + 8 and spec["usermeta"]["judge"]["nulls"] == 22
    for r in yours:
        assert set(r) == {"s", "source", "i", "y", "z", "w"}
        assert all(v is None or type(v) in (int, float) for k, v in r.items() if k not in ("s", "source"))
    outside = {k: v for k, v in spec.items() if k != "datasets"}
    assert "pwned" not in json.dumps(outside) and "alert" not in json.dumps(outside)
    assert b"<script" not in views.bind_json(view, metrics, None)[0]
    names, told = views.write((view,), metrics, tmp_path / "out")
    assert names == ["metrics.json", "v.vl.json"] and "22 value(s)" in told[0] and "gaps" in told[0]


def test_a_huge_dataset_is_cut_and_said_so(tmp_path):
    view = _view(tmp_path, {"d": [{"columns": {"i": "#0", "y": "ys[#0]"}}],
                            "g": [{"columns": {"i": "#0", "j": "#1", "v": "m[#0][#1]"}}]})
    metrics = {"ys": [0.5] * (views.MAX_ROWS + 10), "m": [[1.0] * 300] * 300}
    rows, count = views.dataset_rows(view, metrics, "yours")
    assert len(rows["d"]) == views.MAX_ROWS and len(rows["g"]) == views.MAX_ROWS and count.cut
    _, told = views.write((view,), metrics, tmp_path / "out")
    assert any("first 20,000 points" in t for t in told)


@pytest.mark.parametrize("bad, message", [
    ({"title": "", "description": "x", "usermeta": {"judge": {"datasets": {"d": [{"columns": {}}]}}}}, "needs a title"),
    ({"title": "t", "description": "x"}, "usermeta.judge.datasets"),
    ({"title": "t", "description": "x", "usermeta": {"judge": {"datasets": {"d": [{"columns": {"y": "ys[0]"}}]}}}},
     "is not a path"),
    ({"title": "t", "description": "x", "usermeta": {"judge": {"datasets": {"d": [{"columns": {"y": "m[#1]"}}]}}}},
     "skip one"),
    ({"title": "t", "description": "x", "usermeta": {"judge": {"datasets": {"d": [{"columns": {"y": "a"},
                                                                                      "const": {"s": [1]}}]}}}},
     "const must map"),
])
def test_a_broken_view_is_the_authors_error(tmp_path, bad, message):
    (tmp_path / "b.vl.json").write_text(json.dumps(bad))
    with pytest.raises(ExerciseError, match=message):
        views.parse_view(tmp_path / "b.vl.json")


def test_drawn_views_svg_png_and_their_cache(tmp_path):
    ex = EXERCISES["gspo"]
    view = next(v for v in views.exercise_views(ex.root) if v.name == "ratios")
    data, _ = views.bind_json(view, _ref_metrics(ex), views.reference_json(view, ex))
    from judge.service.blobs import artifacts_owner
    from judge.service.blobs_local import LocalBlobs
    from judge.service.drawings import draw

    blobs, owner = LocalBlobs(tmp_path), artifacts_owner("0123456789abcdef01234567")
    (tmp_path / owner).mkdir(parents=True)
    (tmp_path / owner / view.file_name).write_bytes(data)
    assert views_render.drawable("ratios-dark.png") == ("ratios.vl.json", "png", "dark")
    assert views_render.drawable("metrics.json") is None and views_render.drawable("../x.svg") is None
    assert draw(blobs, owner, "other.svg") is None  # no such view in the set

    def drawn(name: str) -> bytes:
        return draw(blobs, owner, name).read_all()

    text = drawn("ratios.svg").decode()
    assert text.startswith("<?xml") and "<svg" in text[:100] and text.count('role="graphics-symbol"') >= 6  # 3 bars of each source
    stamp = (tmp_path / owner / "ratios.svg").stat().st_mtime_ns  # kept in the set
    assert drawn("ratios.svg").decode() == text
    assert (tmp_path / owner / "ratios.svg").stat().st_mtime_ns == stamp  # served as kept, not redrawn
    dark = drawn("ratios-dark.svg").decode()
    assert "#1e1e1e" in dark and "#1e1e1e" not in text
    assert drawn("ratios.png")[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_forked_child_refuses_to_draw():
    views_render.svg({"$schema": views.SCHEMA, "data": {"values": [{"x": 1}]}, "mark": "point",
                      "encoding": {"x": {"field": "x", "type": "quantitative"}}})
    pid = os.fork()
    if pid == 0:  # the child: must raise at once, never reach vl-convert (which would hang)
        try:
            views_render.svg({})
        except views_render.RenderError:
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(2)
        os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_judge_local_draws_svgs_and_one_report(tmp_path):
    from judge.cli import _draw_views
    from judge.models import Artifact, Verdict

    ex = EXERCISES["gspo"]
    names, _ = views.write(views.exercise_views(ex.root), _ref_metrics(ex), tmp_path,
                           lambda v: views.reference_json(v, ex))
    verdict = Verdict(exercise="gspo", verdict="accepted", mode="run", seed=0,
                      artifacts=[Artifact(name=n, path=str(tmp_path / n), media_type="application/json") for n in names])
    _draw_views(verdict, tmp_path, ex.title)
    drawn = {a.name for a in verdict.artifacts} - set(names)
    assert drawn == {"gradients.svg", "ratios.svg", "surrogate.svg", "report.html"}
    page = (tmp_path / "report.html").read_text()
    assert page.count('class="view"') == 3 and "vegaEmbed" in page
    assert "https://" not in page.split("<script>")[0]  # nothing fetched by the page's markup


def test_the_scaffold_declares_its_views_the_same_way(tmp_path, validator):
    from judge.authoring.scaffold import new_exercise
    from judge.exercise import load_exercise

    new_exercise("scaffold_views", root=tmp_path)
    ex = load_exercise(tmp_path / "exercises" / "scaffold_views")
    ref = ex.experiment.run(ex.ref, None)
    found = views.exercise_views(ex.root)
    assert [v.name for v in found] == ["fit", "loss"]
    for view in found:
        spec, count = views.bind(view, ref, views.dataset_rows(view, ref, "reference")[0])
        assert validator.is_valid(spec) and count.nulls == 0
        assert {r["source"] for rows in spec["datasets"].values() for r in rows} == {"yours", "reference"}
    names = ex.experiment.run(ex.ref, tmp_path / "figs") and sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert names == ["fit.vl.json", "loss.vl.json", "metrics.json"]  # by hand: metrics and views


def test_the_bundle_is_kept_on_disk_per_version(tmp_path, monkeypatch):
    """Bundling vega takes seconds: report.html reads it back from the cache the next time."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    views_render._bundle.cache_clear()
    try:
        text = views_render._bundle()
        (kept,) = (tmp_path / "judge").glob("vega-bundle-*.js")
        assert kept.read_text() == text and "vegaEmbed" in text and "</script" not in text.lower()
        kept.write_text("window.vegaEmbed = 'from the cache';")
        views_render._bundle.cache_clear()
        assert views_render._bundle() == "window.vegaEmbed = 'from the cache';"
    finally:
        views_render._bundle.cache_clear()
