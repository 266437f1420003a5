"""``judge export --format gradescope``: the zip's contents, the results.json mapping, and the
autograder run end to end on this machine (AUTOGRADER_ROOT instead of /autograder)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile

import pytest

from judge.cli import main
from judge.exercise import TIERS, discover
from judge.authoring.export import gradescope_results, gradescope_zip, parse_points
from judge.grading import grade

GSPO = discover()["gspo"]
CONFIG = {"slug": "gspo", "points": {"T0": 10, "T1": 40, "T2": 30, "T3": 20}, "visibility": "visible",
          "hidden_visibility": "after_published"}


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "gspo.zip"
    assert main(["export", "exercises/gspo", "--format", "gradescope", "--out", str(out),
                 "--points", "T0=10,T1=40,T2=30,T3=20", "--hidden-visibility", "after_published"]) == 0
    return out


def test_the_zip_holds_the_scripts_the_judge_and_the_exercise(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as zf:
        names = zf.namelist()
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        config = json.loads(zf.read("gradescope.json"))
        run = zf.read("run_autograder").decode()
        setup = zf.read("setup.sh").decode()
    for exe in ("setup.sh", "run_autograder"):
        assert exe in names and modes[exe] & stat.S_IXUSR, exe
    for need in ("judge/cli.py", "judge/grading.py", "sandbox/zygote.py", "pyproject.toml",
                 "exercises/gspo/exercise.toml", "exercises/gspo/tests/test_t1_oracle.py",
                 "reference/gspo/solution.py", "reference/gspo/oracle.py"):
        assert need in names, need
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith(("exercises/", "reference/")) and "/gspo/" not in n]
    assert config["points"] == {"T0": 10.0, "T1": 40.0, "T2": 30.0, "T3": 20.0}
    assert 'judge.cli local "$EXERCISE"' in run and "--json" in run and "results.json" in run
    assert "exercises/gspo" in run and "/autograder/submission" not in run.replace("$AG/submission", "")
    assert "torch==" in setup and "download.pytorch.org/whl/cpu" in setup


def test_the_same_inputs_give_the_same_zip(autograder_zip, tmp_path):
    again = gradescope_zip(GSPO, tmp_path / "again.zip", points=parse_points("T0=10,T1=40,T2=30,T3=20"),
                           hidden_visibility="after_published")
    assert again.read_bytes() == autograder_zip.read_bytes()


def _by_tier(results):
    out = {}
    for t in results["tests"]:
        out.setdefault(t["name"].split()[0], []).append(t)
    return out


def test_results_map_tiers_and_tests_to_gradescope_tests():
    wrong = next(w for w in GSPO.wrong_solutions() if w.expect_tier == "T1")
    v = grade(GSPO, wrong.source, sandbox=None, seed=3)
    res = gradescope_results(GSPO, v, CONFIG)
    tiers = _by_tier(res)
    assert list(tiers) == list(TIERS)
    for tier, tests in tiers.items():
        assert sum(t["max_score"] for t in tests) == pytest.approx(CONFIG["points"][tier])
        for t in tests:
            assert set(t) >= {"name", "score", "max_score", "status", "output", "visibility"}
            assert t["status"] in ("passed", "failed")
            assert t["score"] == (t["max_score"] if t["status"] == "passed" else 0)
    failed = [t for t in tiers["T1"] if t["status"] == "failed"]
    assert failed and all(t["output"] for t in failed)
    assert res["score"] == pytest.approx(sum(t["score"] for t in res["tests"]))
    assert 0 < res["score"] < 100 and "REJECTED" in res["output"] and "--seed 3" in res["output"]
    visibilities = {t["visibility"] for t in res["tests"]}
    assert visibilities == {"visible", "after_published"}  # hidden tests follow --hidden-visibility


def test_a_submission_that_cannot_run_scores_zero_everywhere():
    v = grade(GSPO, "def sequence_ratio(:\n", sandbox=None)
    res = gradescope_results(GSPO, v, CONFIG)
    assert res["score"] == 0 and all(t["status"] == "failed" for t in res["tests"])
    assert all("syntax_error" in t["output"] for t in res["tests"])
    none = gradescope_results(GSPO, None, CONFIG, failure="the judge failed (exit status 4)")
    assert none["score"] == 0 and "could not grade" in none["output"]
    assert len(none["tests"]) == len(res["tests"])


def test_the_autograder_runs_end_to_end(autograder_zip, tmp_path):
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    with zipfile.ZipFile(autograder_zip) as zf:
        zf.extractall(root / "source")
    # the learner uploaded a file under another name: the only .py file is graded
    (root / "submission" / "my_gspo.py").write_text(GSPO.solution_path.read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_")}
    env.update(AUTOGRADER_ROOT=str(root), JUDGE_PYTHON=sys.executable)
    proc = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((root / "results" / "results.json").read_text())
    assert res["score"] == pytest.approx(100), [t for t in res["tests"] if t["status"] != "passed"][:3]
    assert "ACCEPTED" in res["output"] and all(t["status"] == "passed" for t in res["tests"])


def test_setup_installs_the_dependencies_pyproject_declares(autograder_zip):
    """setup.sh's pip line is the project's own dependency list (read from its metadata), not a
    second copy: every runtime dependency of pyproject.toml but torch (installed from the CPU
    index), and none of the test extras."""
    import shlex
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    with zipfile.ZipFile(autograder_zip) as zf:
        setup = zf.read("setup.sh").decode()
    lines = [ln for ln in setup.splitlines() if ln.startswith("/autograder/venv/bin/pip install -q ")
             and "--upgrade" not in ln and "--index-url" not in ln]
    assert len(lines) == 1, lines
    installed = shlex.split(lines[0])[3:]
    assert sorted(installed) == sorted(d for d in project["dependencies"] if not d.startswith("torch"))
    assert not set(installed) & set(project["optional-dependencies"]["test"])
