"""Discovery: exercises come from folders; a broken folder is an error that names it."""

from __future__ import annotations

import shutil

import pytest

from judge.errors import ExerciseError, UnknownExercise
from judge.exercise import EXERCISES_DIR, discover, load_exercise, resolve


def test_discovers_every_folder_with_an_exercise_toml():
    found = discover()
    folders = {p.parent.name for p in EXERCISES_DIR.glob("*/exercise.toml")}
    assert set(found) == folders and "glm5_mis" in found


def test_resolve_by_slug_and_by_path():
    assert resolve("gspo").slug == "gspo"
    assert resolve(str(EXERCISES_DIR / "gspo")).slug == "gspo"
    with pytest.raises(UnknownExercise, match="expected one of: .*glm5_mis"):
        resolve("no_such_exercise")


@pytest.fixture
def copy(tmp_path):
    dst = tmp_path / "exercises" / "glm5_mis"
    shutil.copytree(EXERCISES_DIR / "glm5_mis", dst)
    return dst


def test_a_broken_toml_names_its_folder(copy):
    (copy / "exercise.toml").write_text("title = [unclosed")
    with pytest.raises(ExerciseError, match=r"glm5_mis/exercise.toml: invalid TOML"):
        load_exercise(copy)


def test_missing_files_and_fields_are_named(copy):
    (copy / "spec.md").unlink()
    with pytest.raises(ExerciseError, match="glm5_mis: missing spec.md"):
        load_exercise(copy)


def test_slug_must_match_the_folder(copy):
    text = (copy / "exercise.toml").read_text().replace('slug = "glm5_mis"', 'slug = "other"')
    (copy / "exercise.toml").write_text(text)
    with pytest.raises(ExerciseError, match="must equal the folder name"):
        load_exercise(copy)


def test_badly_named_test_files_are_rejected(copy):
    (copy / "tests" / "test_t9_whatever.py").write_text("")
    with pytest.raises(ExerciseError, match="test_t<0-3>"):
        load_exercise(copy)


def test_wrong_solutions_must_declare_a_tier(tmp_path, copy):
    ex = load_exercise(copy)
    wrong = ex.reference_dir / "wrong"
    wrong.mkdir(parents=True)
    (wrong / "w.py").write_text('"""No tier here."""\n')
    with pytest.raises(ExerciseError, match="expect: T<n>"):
        ex.wrong_solutions()
