"""``judge new``: the scaffold writes a complete exercise that validates out of the box."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from judge.authoring.scaffold import TEMPLATE, new_exercise, template_files
from judge.cli import main
from judge.exercise import load_exercise
from judge.authoring.validate import validate_exercise

ROOT = Path(__file__).resolve().parent.parent


def test_judge_new_writes_the_folder_layout(tmp_path, capsys):
    assert main(["new", "scaffold_layout", "--root", str(tmp_path), "--title", "Masked means"]) == 0
    ex_dir, ref_dir = tmp_path / "exercises" / "scaffold_layout", tmp_path / "reference" / "scaffold_layout"
    for rel in ("exercise.toml", "spec.md", "starter.py", "experiment.py", "tests/test_t0_contracts.py",
                "tests/test_t1_oracle.py", "tests/test_t2_properties.py", "tests/test_t3_experiment.py",
                "views/loss.vl.json", "views/fit.vl.json"):
        assert (ex_dir / rel).is_file(), rel
    for rel in ("solution.py", "oracle.py", "wrong/divide_by_length.py", "wrong/multiply_by_mask.py"):
        assert (ref_dir / rel).is_file(), rel
    ex = load_exercise(ex_dir)
    assert ex.title == "Masked means" and ex.function_names == ["masked_mean"]
    assert [(w.name, w.expect_tier) for w in ex.wrong_solutions()] == [("divide_by_length", "T1"),
                                                                       ("multiply_by_mask", "T1")]
    assert "judge validate" in capsys.readouterr().out


def test_judge_new_refuses_existing_folders_and_bad_slugs(tmp_path, capsys):
    assert main(["new", "scaffold_twice", "--root", str(tmp_path)]) == 0
    before = (tmp_path / "exercises" / "scaffold_twice" / "spec.md").read_text()
    assert main(["new", "scaffold_twice", "--root", str(tmp_path)]) == 2
    assert (tmp_path / "exercises" / "scaffold_twice" / "spec.md").read_text() == before
    assert main(["new", "Bad-Slug", "--root", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_the_scaffold_validates_out_of_the_box(tmp_path, sandbox):
    main(["new", "scaffold_valid", "--root", str(tmp_path)])
    rep = validate_exercise(tmp_path / "exercises" / "scaffold_valid", sandbox=sandbox)
    failed = [f"{c.name}: {c.detail}" for c in rep.checks if c.status != "passed"]
    assert rep.ok and not failed, failed
    m = rep.mutation
    assert m is not None and m.generated == m.tested == m.killed >= 8 and m.survived == m.equivalent == 0
    assert {r.operator for r in m.mutants} >= {"constant", "mask", "summean", "clamp"}


def test_the_scaffold_is_written_from_the_template_files(tmp_path):
    """Every file under judge/authoring/template/ is written once, with the slug and the title
    in place of __SLUG__ and __TITLE__ (in paths and in text) and nothing else changed."""
    written = new_exercise("scaffold_files", root=tmp_path, title="From files")
    rels = template_files()
    assert len(rels) >= 13 and len(written) == len(rels)
    for rel, path in zip(rels, written):
        assert path == tmp_path / str(rel).replace("__SLUG__", "scaffold_files")
        text = path.read_text()
        assert "__SLUG__" not in text and "__TITLE__" not in text
        original = (TEMPLATE / rel).read_text()
        assert text == original.replace("__SLUG__", "scaffold_files").replace("__TITLE__", "From files")


def test_the_wheel_ships_the_template(tmp_path):
    """The template is package data: a wheel built from the project holds every template file."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("judge", "sandbox"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", src)
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out), str(src)], check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = out.glob("judge-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [str(rel) for rel in template_files() if f"judge/authoring/template/{rel}" not in names]
    assert not missing, missing
