"""Exercises are discovered from folders: ``exercises/<slug>/exercise.toml``.

A broken folder is an ``ExerciseError`` that names it. Reference material lives apart, in
``reference/<slug>/`` (``solution.py``, ``oracle.py``, the known mistakes of ``wrong.toml`` and
``wrong/*.py``, the equivalent mutants of ``mutants.toml``: see ``judge.wrong``), and is only
ever loaded by the trusted judge process.

A *pack* is a folder holding ``exercises/`` and ``reference/``; it may live anywhere. Which one
the judge uses is one setting, ``--exercises DIR`` or ``JUDGE_EXERCISES_DIR`` (the pack or its
``exercises/`` folder), read by ``exercises_dir``; without it, this checkout's own pack, or
``./exercises`` when the judge is installed from a wheel (docs/authoring.md, "Packs").
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType

from judge.errors import ExerciseError, UnknownExercise, UsageError
from judge.wrong import (EquivalentMutant, WrongSolution, load_equivalent_mutants,  # noqa: F401
                         load_wrong_solutions)

# The folder holding the ``judge`` package: a checkout, or site-packages when installed.
REPO_ROOT = Path(__file__).resolve().parent.parent
# This checkout's own pack (absent when the judge is installed from a wheel).
EXERCISES_DIR = REPO_ROOT / "exercises"
REFERENCE_DIR = REPO_ROOT / "reference"
EXERCISES_ENV = "JUDGE_EXERCISES_DIR"  # the pack setting's environment variable
TIERS = ("T0", "T1", "T2", "T3")
_SLUG = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_TEST_FILE = re.compile(r"^test_t([0-3])_[a-z0-9_]+\.py$")


@dataclass(frozen=True)
class Function:
    name: str  # the function the learner implements
    signature: str  # as shown to the learner, e.g. "f(x, mask) -> Tensor[B]"
    returns: str = "tensor"  # the declared return kind; the proxy rejects anything else
    # the parameters the function may write in place (all others are read-only: judge.readonly)
    writes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Limits:
    call_seconds: float = 20.0  # wall-clock limit for one call into the submission (see docs/authoring.md)
    total_seconds: float = 60.0  # wall-clock limit for the whole grading
    cpu_seconds: int = 60  # CPU time of the sandboxed process
    memory_mb: int = 1024  # extra memory over the zygote's baseline
    # What the trusted side decodes and holds of the submission's answers (judge.box.job):
    answer_mb: int = 64  # the largest single answer (header and tensor bytes), MB
    answers_mb: int = 256  # all of one grading's answers together, MB
    metrics_bytes: int = 1 << 20  # T3: the experiment's metrics, as JSON, at most (checked before any copy)
    artifact_bytes: int = 1 << 20  # T3: each file the plots write (metrics.json, each SVG), at most
    plot_seconds: float = 5.0  # T3: drawing the plots of one grading, at most (then a placeholder figure)


@dataclass
class Exercise:
    slug: str
    root: Path
    title: str
    paper: str
    official: list[str]
    summary: str
    functions: list[Function]
    limits: Limits
    run_seed: int = 0  # the fixed seed of run mode
    hidden_feedback: str = "message"  # what a failed hidden test shows: "message" or "name"
    reference_root: Path = field(default=REFERENCE_DIR)  # <repo>/reference, beside exercises/

    # --- learner-visible files -------------------------------------------------------------
    @property
    def spec_path(self) -> Path:
        return self.root / "spec.md"

    @property
    def starter_path(self) -> Path:
        return self.root / "starter.py"

    @property
    def experiment_path(self) -> Path:
        return self.root / "experiment.py"

    def test_files(self) -> dict[str, list[Path]]:
        """Tier → its test files, in name order."""
        out: dict[str, list[Path]] = {t: [] for t in TIERS}
        for p in sorted((self.root / "tests").glob("test_t*.py")):
            m = _TEST_FILE.match(p.name)
            if not m:
                raise ExerciseError(f"{p}: tier test files are named test_t<0-3>_<name>.py")
            out[f"T{m.group(1)}"].append(p)
        return out

    # --- trusted reference material -------------------------------------------------------
    @property
    def reference_dir(self) -> Path:
        return self.reference_root / self.slug

    @property
    def solution_path(self) -> Path:
        return self.reference_dir / "solution.py"

    @property
    def oracle_path(self) -> Path:
        return self.reference_dir / "oracle.py"

    def wrong_solutions(self) -> list[WrongSolution]:
        """The known mistakes (``wrong.toml`` built against the reference, and ``wrong/*.py``)."""
        return load_wrong_solutions(self.reference_dir, self.spec_path)

    def wrong_solution(self, name: str) -> WrongSolution:
        """One known mistake by name; an ExerciseError lists the names there are."""
        found = {w.name: w for w in self.wrong_solutions()}
        if name not in found:
            raise ExerciseError(f"exercise {self.slug} has no known-wrong solution {name!r}; "
                                f"expected one of: {', '.join(found) or 'none'}")
        return found[name]

    def equivalent_mutants(self) -> list[EquivalentMutant]:
        """The mutants ``reference/<slug>/mutants.toml`` declares equivalent, with their reasons."""
        return load_equivalent_mutants(self.reference_dir)

    @cached_property
    def ref(self) -> ModuleType:
        return load_module(self.solution_path, f"_judge_ref_{self.slug}_solution")

    @cached_property
    def oracle(self) -> ModuleType:
        return load_module(self.oracle_path, f"_judge_ref_{self.slug}_oracle")

    @cached_property
    def experiment(self) -> ModuleType:
        return load_module(self.experiment_path, f"_judge_ex_{self.slug}_experiment")

    @property
    def function_names(self) -> list[str]:
        return [f.name for f in self.functions]


def load_module(path: Path, name: str) -> ModuleType:
    """Import a trusted file by path (reference, oracle, tests, experiment)."""
    if name in sys.modules:
        return sys.modules[name]
    if not path.is_file():
        raise ExerciseError(f"missing file {path}")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        del sys.modules[name]
        raise ExerciseError(f"{path} failed to import: {type(e).__name__}: {e}") from e
    return mod


def load_exercise(folder: Path) -> Exercise:
    """Parse ``folder/exercise.toml``; every problem is an ExerciseError naming the folder."""
    folder = Path(folder).resolve()
    toml_path = folder / "exercise.toml"
    if not toml_path.is_file():
        raise UnknownExercise(f"{folder} is not an exercise (no exercise.toml)")
    try:
        data = tomllib.loads(toml_path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ExerciseError(f"{toml_path}: invalid TOML: {e}") from e
    slug = data.get("slug", folder.name)
    if slug != folder.name or not _SLUG.match(slug):
        raise ExerciseError(f"{toml_path}: slug {slug!r} must equal the folder name and match {_SLUG.pattern}")
    try:
        functions = [Function(f["name"], f["signature"], f.get("returns", "tensor"),
                              tuple(str(w) for w in f.get("writes", ())))
                     for f in data["functions"]]
        limits = Limits(**data.get("limits", {}))
        ex = Exercise(
            slug=slug, root=folder, title=data["title"], paper=data.get("paper", ""),
            official=list(data.get("official", [])), summary=data.get("summary", ""),
            functions=functions, limits=limits, run_seed=int(data.get("run_seed", 0)),
            hidden_feedback=data.get("hidden_feedback", "message"),
            reference_root=folder.parent.parent / "reference",
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ExerciseError(f"{toml_path}: {type(e).__name__}: {e}") from e
    if not functions:
        raise ExerciseError(f"{toml_path}: declares no functions")
    if "equivalent_mutants" in data:  # learner-visible: the reasons would reveal the reference
        raise ExerciseError(f"{toml_path}: equivalent_mutants belong in reference/{slug}/mutants.toml "
                            f"as [[equivalent]] entries, not in the learner-visible exercise.toml")
    for p in (ex.spec_path, ex.starter_path, ex.experiment_path):
        if not p.is_file():
            raise ExerciseError(f"exercise {slug}: missing {p.name}")
    ex.test_files()
    return ex


def default_exercises_dir() -> Path:
    """Without a setting: this checkout's ``exercises/``, or ``./exercises`` when installed."""
    if EXERCISES_DIR.is_dir() and REFERENCE_DIR.is_dir():
        return EXERCISES_DIR
    return Path("exercises").resolve()


def pack_exercises(folder: str | Path, source: str = "--exercises") -> Path:
    """The ``exercises/`` folder of a pack, given the pack itself or that folder: ``folder`` is the
    exercises folder when it holds ``<slug>/exercise.toml``, or when it is named ``exercises`` and
    has no ``exercises/`` of its own; else it is the pack."""
    folder = Path(folder).expanduser().resolve()
    if not folder.is_dir():
        raise UsageError(f"{source}: no such folder {folder}")
    if any(folder.glob("*/exercise.toml")):
        return folder
    if (folder / "exercises").is_dir() or folder.name != "exercises":
        return folder / "exercises"
    return folder


def exercises_dir(setting: str | Path | None = None, env: dict[str, str] | None = None) -> Path:
    """Where exercises are found: ``setting`` (``--exercises DIR``), else ``$JUDGE_EXERCISES_DIR``
    (from ``env``, default ``os.environ``), else ``default_exercises_dir()``."""
    if setting is not None and str(setting).strip():
        return pack_exercises(setting)
    value = (os.environ if env is None else env).get(EXERCISES_ENV, "").strip()
    return pack_exercises(value, EXERCISES_ENV) if value else default_exercises_dir()


def exercise_folders(root: Path | None = None) -> list[Path]:
    """Every folder under ``root`` (default: ``exercises_dir()``) holding an exercise.toml, by
    name: the one walk over exercises (``discover``, ``resolve``'s list, the service's catalog
    and ``judge validate --all`` read it), nothing loaded."""
    return sorted(p.parent for p in Path(root or exercises_dir()).glob("*/exercise.toml"))


def discover(root: Path | None = None) -> dict[str, Exercise]:
    """Every exercise under ``root`` (default: ``exercises_dir()``), by slug."""
    out = {}
    for folder in exercise_folders(root):
        ex = load_exercise(folder)
        out[ex.slug] = ex
    return out


def resolve(name_or_path: str, root: Path | None = None) -> Exercise:
    """An exercise by folder path, or by slug under ``root`` (default: ``exercises_dir()``);
    UnknownExercise lists what exists there."""
    p = Path(name_or_path)
    if (p / "exercise.toml").is_file():
        return load_exercise(p)
    root = Path(root or exercises_dir())
    if _SLUG.match(name_or_path) and (root / name_or_path / "exercise.toml").is_file():
        return load_exercise(root / name_or_path)
    known = ", ".join(p.name for p in exercise_folders(root)) or "none"
    raise UnknownExercise(f"unknown exercise {name_or_path!r}; expected one of: {known} "
                          f"(in {root}; another pack: --exercises DIR or {EXERCISES_ENV}), "
                          f"or a folder holding exercise.toml")
