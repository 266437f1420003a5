"""Every exercise's experiment separates the toy from the drawing.

Under the judge, T3 runs ``experiment.run(sub, None)`` and the plots are drawn after the verdict
with ``experiment.plot(metrics, out_dir)``, from the metrics alone. So ``plot`` must write every
file it names, ``metrics.json`` must hold the metrics, and the metrics a wrong submission can
produce (NaN, inf, empty lists) must still give plots rather than a crash.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import pytest

from judge.exercise import discover

EXERCISES = discover()
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SVG_ROOT = "{http://www.w3.org/2000/svg}svg"
_METRICS: dict[str, dict] = {}


def _reference_metrics(slug: str) -> dict:
    if slug not in _METRICS:
        ex = EXERCISES[slug]
        _METRICS[slug] = ex.experiment.run(ex.ref, None)
    return json.loads(json.dumps(_METRICS[slug]))  # a fresh copy: plot must not need the original


def _map_floats(x, f):
    if isinstance(x, dict):
        return {k: _map_floats(v, f) for k, v in x.items()}
    if isinstance(x, list):
        return [_map_floats(v, f) for v in x]
    if isinstance(x, float):
        return f(x)
    return x


def _empty_lists(x):
    if isinstance(x, dict):
        return {k: _empty_lists(v) for k, v in x.items()}
    return [] if isinstance(x, list) else x


def _check_written(names, out_dir):
    assert "metrics.json" in names, names
    assert any(n.endswith((".svg", ".png")) for n in names), f"no plot (SVG or PNG) among {names}"
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(names), "plot must return every file it wrote"
    for name in names:
        path = out_dir / name
        assert path.is_file(), name
        if name.endswith(".png"):
            assert path.read_bytes()[:8] == PNG_SIGNATURE, f"{name} is not a PNG"
        if name.endswith(".svg"):  # well-formed XML (text escaped), an <svg> root
            assert ET.fromstring(path.read_bytes()).tag == SVG_ROOT, f"{name} is not an SVG"


@pytest.mark.parametrize("slug", sorted(EXERCISES))
def test_plot_draws_from_the_metrics(slug, tmp_path):
    experiment = EXERCISES[slug].experiment
    metrics = _reference_metrics(slug)
    names = experiment.plot(metrics, tmp_path / "out")  # a folder that does not exist yet
    _check_written(names, tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert saved == json.loads(json.dumps(metrics))
    again = experiment.plot(metrics, tmp_path / "again")  # same metrics, same bytes (no date, fixed ids)
    assert again == names
    for name in names:
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "out" / name).read_bytes(), name


@pytest.mark.parametrize("odd", ["nan", "inf", "empty_lists"])
@pytest.mark.parametrize("slug", sorted(EXERCISES))
def test_plot_survives_odd_metrics(slug, odd, tmp_path):
    """A wrong submission's metrics: every float NaN (or +-inf), or every list empty."""
    metrics = _reference_metrics(slug)
    if odd == "nan":
        metrics = _map_floats(metrics, lambda v: math.nan)
    elif odd == "inf":
        metrics = _map_floats(metrics, lambda v: math.inf if v >= 0 else -math.inf)
    else:
        metrics = _empty_lists(metrics)
    names = EXERCISES[slug].experiment.plot(metrics, tmp_path)
    _check_written(names, tmp_path)
