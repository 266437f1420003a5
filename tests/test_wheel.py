"""The judge installed from a wheel, in a fresh virtual environment, grades a pack outside the
checkout: no path assumption about its own checkout, package data (the scaffold's templates)
shipped. Offline and fast: the wheel is built without isolation, installed without an index, and
the fresh environment borrows the project's installed dependencies through a ``.pth`` file."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import signal
import site
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from judge.exercise import EXERCISES_ENV, REPO_ROOT
from judge.models import Verdict

SLUG = "wheel_demo"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")


def clean_env() -> dict[str, str]:
    """This process's environment without what would point the judge back at the checkout."""
    return {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_") and k != "PYTHONPATH"}


def run(*cmd, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=clean_env() if env is None else env,
                       capture_output=True, text=True, timeout=timeout)
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
    version = importlib.metadata.version("setuptools")
    assert tuple(int(x) for x in version.split(".")[:2]) >= (70, 1), (
        f"setuptools {version} cannot build a wheel offline without the `wheel` package: "
        "`make setup` installs the test extra of pyproject.toml (setuptools>=70.1)")
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


@pytest.fixture(scope="module")
def pack(installed) -> Path:
    """A pack outside the checkout, scaffolded by the installed judge."""
    _, judge, work, _ = installed
    pack = work / "pack"
    pack.mkdir()
    # `judge new` reads its templates from the installed package; the pack's default is ./
    run(judge, "new", SLUG, cwd=pack, env=clean_env())
    assert (pack / "exercises" / SLUG / "exercise.toml").is_file()
    return pack


def test_the_installed_judge_validates_and_grades_a_pack(installed, pack):
    py, judge, work, _ = installed
    env = clean_env()
    run(judge, "validate", "--all", "--no-mutants", cwd=pack, env=env)

    r = run(judge, "local", SLUG, "--reference", "--json", "--out", work / "out",
            cwd=work, env={**env, EXERCISES_ENV: str(pack)})
    v = Verdict.model_validate_json(r.stdout)
    assert v.exercise == SLUG and v.verdict == "accepted"
    assert [t.tier for t in v.tiers] == ["T0", "T1", "T2", "T3"]
    assert v.sandbox, "graded in the sandbox"


def test_the_installed_judge_exports_a_pack(installed, pack):
    _, judge, work, _ = installed
    out = work / "export.zip"
    run(judge, "export", SLUG, "--exercises", pack, "--out", out, cwd=work, env=clean_env())
    names = set(zipfile.ZipFile(out).namelist())
    assert {"setup.sh", "run_autograder", "judge/cli.py", "sandbox/zygote.py",
            f"exercises/{SLUG}/exercise.toml", f"reference/{SLUG}/solution.py"} <= names


def test_the_installed_judge_serves_a_pack(installed, pack):
    import httpx

    _, judge, work, _ = installed
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = work / "serve"
    root.mkdir()
    env = {**clean_env(), "JUDGE_API_KEYS": "wheel-key", "JUDGE_WORKERS": "1"}
    with open(root / "server.log", "wb") as log:
        proc = subprocess.Popen([str(judge), "serve", "--port", str(port), "--exercises", str(pack)],
                                cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    url, auth = f"http://127.0.0.1:{port}", {"Authorization": "Bearer wheel-key"}
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (root / "server.log").read_text()
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (root / "server.log").read_text()
            time.sleep(0.2)
        listed = httpx.get(url + "/exercises", headers=auth, timeout=30).json()
        assert SLUG in str(listed)
        code = (pack / "reference" / SLUG / "solution.py").read_text()
        r = httpx.post(url + "/submit?wait=60", headers=auth, timeout=90,
                       json={"exercise": SLUG, "mode": "submit", "code": code})
        assert r.status_code == 200, r.text
        verdict = r.json()["verdict"]  # {"status": "done", "verdict": the document}
        assert verdict["exercise"] == SLUG and verdict["verdict"] == "accepted"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
