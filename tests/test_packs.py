"""Exercise packs anywhere: a folder holding exercises/ and reference/, named by one setting
(``--exercises DIR`` or ``JUDGE_EXERCISES_DIR``) that every command honours alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from judge.cli import main
from judge.errors import UnknownExercise, UsageError
from judge.exercise import (EXERCISES_DIR, EXERCISES_ENV, REPO_ROOT, discover, exercises_dir,
                            pack_exercises, resolve)
from judge.models import Verdict

JUDGE = [sys.executable, "-m", "judge.cli"]
SLUG = "pack_demo"  # exists only in the pack, never in the checkout


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> Path:
    """A pack outside the checkout with one scaffolded exercise."""
    root = tmp_path_factory.mktemp("pack")
    assert not root.resolve().is_relative_to(REPO_ROOT)
    assert main(["new", SLUG, "--root", str(root)]) == 0
    assert not (EXERCISES_DIR / SLUG).exists()
    return root


def judge(*args: str, cwd: Path, pack_env: Path | None = None) -> subprocess.CompletedProcess:
    """``judge ARGS`` run from ``cwd`` (outside the checkout), the setting in the environment
    only when ``pack_env`` is given."""
    env = {k: v for k, v in os.environ.items() if k != EXERCISES_ENV}
    if pack_env is not None:
        env[EXERCISES_ENV] = str(pack_env)
    return subprocess.run(JUDGE + list(args), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


# --- the setting ---------------------------------------------------------------------------
def test_the_setting_names_a_pack_or_its_exercises_folder(pack, tmp_path):
    assert pack_exercises(pack) == pack.resolve() / "exercises"
    assert pack_exercises(pack / "exercises") == pack.resolve() / "exercises"
    empty = tmp_path / "new_pack"  # a pack not yet holding anything: its exercises/ is to come
    empty.mkdir()
    assert pack_exercises(empty) == empty.resolve() / "exercises"
    named = tmp_path / "exercises"  # an empty exercises folder, and a pack that is named so
    named.mkdir()
    assert pack_exercises(named) == named.resolve()
    (named / "exercises").mkdir()
    assert pack_exercises(named) == named.resolve() / "exercises"
    with pytest.raises(UsageError, match="no such folder"):
        pack_exercises(tmp_path / "missing")


def test_the_option_wins_over_the_environment_which_wins_over_the_default(pack, tmp_path):
    other = tmp_path / "other" / "exercises"
    other.mkdir(parents=True)
    env = {EXERCISES_ENV: str(pack)}
    assert exercises_dir(None, env={}) == EXERCISES_DIR  # this checkout's own pack
    assert exercises_dir(None, env=env) == pack.resolve() / "exercises"
    assert exercises_dir(other, env=env) == other.resolve()
    with pytest.raises(UsageError, match=EXERCISES_ENV):
        exercises_dir(None, env={EXERCISES_ENV: str(tmp_path / "missing")})


def test_discover_and_resolve_read_the_setting(pack, monkeypatch):
    monkeypatch.setenv(EXERCISES_ENV, str(pack))
    assert list(discover()) == [SLUG]
    assert resolve(SLUG).reference_dir == pack.resolve() / "reference" / SLUG
    with pytest.raises(UnknownExercise, match=rf"expected one of: {SLUG} \(in {pack.resolve()}"):
        resolve("glm5_mis")  # the checkout's exercises are not in this pack
    monkeypatch.delenv(EXERCISES_ENV)
    assert SLUG not in discover() and "glm5_mis" in discover()


# --- every command alike -------------------------------------------------------------------
def test_judge_local_grades_a_pack_outside_the_checkout(pack, tmp_path):
    r = judge("local", SLUG, "--exercises", str(pack), "--reference", "--json", "--seed", "5",
              "--out", str(tmp_path / "a"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    v = Verdict.model_validate_json(r.stdout)
    assert v.exercise == SLUG and v.verdict == "accepted" and v.seed == 5
    assert {t.tier for t in v.tiers} == {"T0", "T1", "T2", "T3"}

    # the environment variable, naming the exercises/ folder this time; the starter is rejected
    r = judge("local", SLUG, "--json", "--out", str(tmp_path / "b"), cwd=tmp_path,
              pack_env=pack / "exercises")
    assert r.returncode == 1, r.stderr
    assert Verdict.model_validate_json(r.stdout).verdict == "rejected"

    r = judge("local", SLUG, "--reference", cwd=tmp_path)  # without the setting: not found
    assert r.returncode == 2 and f"unknown exercise '{SLUG}'" in r.stderr


def test_validate_all_and_export_read_the_pack(pack, tmp_path):
    r = judge("validate", "--all", "--no-mutants", "--json", cwd=tmp_path, pack_env=pack)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["ok"] and [e["slug"] for e in report["exercises"]] == [SLUG]

    out = tmp_path / "pack.zip"
    r = judge("export", SLUG, "--exercises", str(pack), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    names = set(zipfile.ZipFile(out).namelist())
    assert {f"exercises/{SLUG}/exercise.toml", f"reference/{SLUG}/solution.py"} <= names


def test_serve_reads_the_pack_from_the_option_or_the_environment(pack, monkeypatch):
    import judge.service.app as app
    from judge.service.catalog import load_catalog

    seen = []
    monkeypatch.setattr(app, "serve", lambda cfg, host, port: seen.append(cfg) or 0)
    assert main(["serve", "--exercises", str(pack), "--workers", "0"]) == 0
    monkeypatch.setenv(EXERCISES_ENV, str(pack / "exercises"))
    assert main(["serve", "--workers", "0"]) == 0
    assert [cfg.exercises_dir for cfg in seen] == [pack.resolve() / "exercises"] * 2
    assert list(load_catalog(seen[0])) == [SLUG]


def test_new_writes_into_the_pack_of_the_setting(tmp_path, capsys):
    assert main(["new", "pack_new", "--exercises", str(tmp_path), "--title", "In a pack"]) == 0
    assert (tmp_path / "exercises" / "pack_new" / "exercise.toml").is_file()
    assert (tmp_path / "reference" / "pack_new" / "solution.py").is_file()
    assert str(tmp_path / "exercises" / "pack_new") in capsys.readouterr().out
