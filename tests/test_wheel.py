"""The judge installed from a wheel, in a fresh virtual environment, grades a pack outside the
checkout: no path assumption about its own checkout, package data (the scaffold's templates)
shipped. Offline and fast: the wheel is built without isolation, installed without an index, and
the fresh environment borrows the project's installed dependencies through a ``.pth`` file."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import pytest

from judge.exercise import EXERCISES_ENV, REPO_ROOT
from judge.models import Verdict

SLUG = "wheel_demo"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")


def run(*cmd, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def package_files(root: Path) -> set[str]:
    """Every file of the judge and sandbox packages, as a wheel names it."""
    out = set()
    for pkg in ("judge", "sandbox"):
        for p in (root / pkg).rglob("*"):
            rel = p.relative_to(root)
            if p.is_file() and "__pycache__" not in rel.parts and p.suffix != ".pyc":
                out.add(rel.as_posix())
    return out


@pytest.fixture(scope="module")
def installed():
    """(python, judge script, work dir) of a fresh venv holding only the judge's wheel."""
    # Readable by the sandbox's unprivileged uid (pytest's own tmp dirs are 0700 under root):
    # the zygote imports from this venv's site-packages.
    work = Path(tempfile.mkdtemp(prefix="judge-wheel-"))
    work.chmod(0o755)
    try:
        src = work / "src"  # a copy, so that building writes nothing into the checkout
        for pkg in ("judge", "sandbox"):
            shutil.copytree(REPO_ROOT / pkg, src / pkg, ignore=_IGNORE)
        shutil.copy2(REPO_ROOT / "pyproject.toml", src / "pyproject.toml")
        run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
            "-q", "-w", work / "dist", src, cwd=work)
        (wheel,) = (work / "dist").glob("judge-*.whl")

        venv = work / "venv"
        run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=work)
        py = venv / "bin" / "python"
        purelib = Path(run(py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                           cwd=work).stdout.strip())
        # the project's dependencies (torch, numpy, pydantic, pip...), not its own judge
        (purelib / "_project_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
        run(py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--ignore-installed",
            "--find-links", work / "dist", wheel, cwd=work)
        yield py, venv / "bin" / "judge", work, wheel
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_the_wheel_ships_every_package_file(installed):
    *_, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = package_files(REPO_ROOT) - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    assert not {n for n in names if n.startswith(("exercises/", "reference/", "tests/"))}


def test_the_installed_judge_imports_from_its_venv_not_the_checkout(installed):
    py, _, work, _ = installed
    out = run(py, "-c", "import judge, sandbox, judge.box.sandbox as b; "
              "print(judge.__file__); print(sandbox.__file__); print(b.REPO_ROOT)", cwd=work).stdout
    venv = (work / "venv").resolve()
    for line in out.split():
        assert Path(line).resolve().is_relative_to(venv), out


def test_the_installed_judge_scaffolds_validates_and_grades_a_pack(installed):
    py, judge, work, _ = installed
    pack = work / "pack"
    pack.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in (EXERCISES_ENV, "PYTHONPATH")}
    # `judge new` reads its templates from the installed package; the pack's default is ./
    run(judge, "new", SLUG, cwd=pack, env=env)
    assert (pack / "exercises" / SLUG / "exercise.toml").is_file()
    run(judge, "validate", "--all", "--no-mutants", cwd=pack, env=env)

    r = run(judge, "local", SLUG, "--reference", "--json", "--out", work / "out",
            cwd=work, env={**env, EXERCISES_ENV: str(pack)})
    v = Verdict.model_validate_json(r.stdout)
    assert v.exercise == SLUG and v.verdict == "accepted"
    assert [t.tier for t in v.tiers] == ["T0", "T1", "T2", "T3"]
    assert v.sandbox, "graded in the sandbox"
