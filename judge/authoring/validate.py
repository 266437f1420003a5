"""``judge validate``: an author's checks of an exercise, and mutation testing of its tests.

For each exercise folder:

- **descriptor**: ``exercise.toml`` parses; every declared function is defined in the starter and
  in the reference; the tests, reference, oracle and experiment import; the known-wrong solutions
  (``wrong.toml`` entries build against the reference, ``wrong/*.py`` files) declare their tier
  and spec section; ``mutants.toml``'s ``[[equivalent]]`` entries have an id and a reason.
- **spec**: ``spec.md`` mentions every declared function.
- **reference accepted** (through the sandbox, submit mode, the validation seed).
- **T3 artifacts**: that run wrote ``metrics.json`` and at least one view (``<view>.vl.json``).
- **limits**: that run fits the exercise's time and CPU limits (a warning above half of them).
- **deterministic**: the reference and one known-wrong solution graded twice with the same seed
  give the same document apart from timings.
- **other seeds**: the reference passes with other seeds, and in run mode (in-process).
- **starter rejected** and **known-wrong rejected** (each in its declared tier; sandbox).
- **diagnosis**: each known-wrong solution, graded as a submission, is named as itself or as an
  equivalent mistake (``judge.diagnose``; a warning below 90%), with the cost per rejected
  grading; an honest solution (the reference, ``tests/solutions/<slug>_*.py``) rejected, or named a mistake
  fails validation.
- **mutants**: simple mutants of the reference (``judge.authoring.mutate``) are graded in-process, tier by
  tier, stopping at the first failing tier; a mutant that survives every tier fails validation
  unless ``reference/<slug>/mutants.toml`` lists it as equivalent, with a reason.

The result is a ``ValidationReport`` (pydantic, in ``judge.authoring.report`` with ``render``, which
prints it as a table; both stay importable from here).
"""

from __future__ import annotations

import ast
import logging
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel

from judge.box.sandbox import StartingSandbox
from judge.errors import ExerciseError, JudgeError
from judge.exercise import TIERS, Exercise, exercise_folders, load_exercise  # noqa: F401 - exercise_folders: validate --all
from judge.wrong import EquivalentMutant
from judge.authoring.report import (CheckResult, CheckStatus, DiagnosisReport, ExerciseReport,  # noqa: F401
                                    MutantResult, MutantStatus, MutationReport, ValidationReport,
                                    render, render_exercise, render_summary)
from judge.models import Verdict

log = logging.getLogger("judge.authoring.validate")

DEFAULT_SEED = 1234
DEFAULT_MAX_MUTANTS = 0  # grade every mutant (in-process, ~0.1-0.4 s each); --max-mutants N caps it
# --- the descriptor ------------------------------------------------------------------------
def defined_functions(path: Path) -> set[str]:
    """Names of the module-level functions a file defines (parsed, never imported)."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except SyntaxError as e:
        raise ExerciseError(f"{path}: line {e.lineno}: {e.msg}") from None
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _check_descriptor(folder: Path) -> tuple[CheckResult, Exercise | None, list[EquivalentMutant]]:
    t0 = time.perf_counter()
    try:
        ex = load_exercise(folder)
        equivalents = ex.equivalent_mutants()
        problems = []
        for label, path in (("the starter", ex.starter_path), ("the reference", ex.solution_path)):
            if not path.is_file():
                problems.append(f"missing {path}")
                continue
            missing = [n for n in ex.function_names if n not in defined_functions(path)]
            if missing:
                problems.append(f"{label} ({path.name}) does not define {', '.join(missing)}")
        if problems:
            return _result("descriptor", "failed", "; ".join(problems), t0), None, equivalents
        from judge.runner import collect

        tests = collect(ex)
        empty = [t for t in TIERS if not tests[t]]
        ex.ref, ex.oracle, ex.experiment  # noqa: B018 - import them now: an error names the file
        wrong = ex.wrong_solutions()
    except JudgeError as e:
        return _result("descriptor", "failed", e.message, t0), None, []
    detail = (f"{len(ex.functions)} function(s): {', '.join(ex.function_names)}; "
              f"{sum(len(v) for v in tests.values())} tests; {len(wrong)} known-wrong solution(s)")
    if empty:
        return _result("descriptor", "failed", f"no tests in tier(s) {', '.join(empty)}", t0), None, equivalents
    if not wrong:
        return _result("descriptor", "failed", f"no known-wrong solutions in {ex.reference_dir} (wrong.toml, wrong/*.py)",
                       t0), None, equivalents
    return _result("descriptor", "passed", detail, t0), ex, equivalents


def _check_spec(ex: Exercise) -> CheckResult:
    t0 = time.perf_counter()
    text = ex.spec_path.read_text()
    missing = [n for n in ex.function_names if n not in text]
    if missing:
        return _result("spec", "failed", f"spec.md never mentions {', '.join(missing)}", t0)
    return _result("spec", "passed", f"mentions {', '.join(ex.function_names)}", t0)


# --- grading checks --------------------------------------------------------------------------
def _result(name: str, status: CheckStatus, detail: str, t0: float) -> CheckResult:
    return CheckResult(name=name, status=status, detail=detail,
                       duration_ms=round((time.perf_counter() - t0) * 1000, 1))


def _failures(v: Verdict, limit: int = 3) -> str:
    bits = []
    if v.error is not None:
        bits.append(f"{v.error.kind}: {v.error.message[:300]}")
    for t in v.tiers:
        for r in t.tests:
            if r.status in ("failed", "error"):
                first = r.message.strip().splitlines()[0][:200] if r.message.strip() else ""
                bits.append(f"{t.tier} {r.name}: {first}")
    shown = bits[:limit] + ([f"... {len(bits) - limit} more"] if len(bits) > limit else [])
    return "; ".join(shown)


def normalized(v: Verdict) -> dict:
    """The document without what legitimately differs between two runs: timings, resources,
    durations and where the artifacts were written."""
    d = v.model_dump(exclude={"timings", "resources"})
    for t in d["tiers"]:
        t.pop("duration_ms", None)
        for r in t["tests"]:
            r.pop("duration_ms", None)
    for a in d["artifacts"]:
        a.pop("path", None)
    return d


def _first_difference(a: dict, b: dict, path: str = "") -> str:
    if type(a) is not type(b):
        return f"{path or 'document'}: {a!r} vs {b!r}"
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else k)
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {str(a)[:200]!r} vs {str(b)[:200]!r}"


class _Grader:
    """Grading calls for one validation run: the sandbox (shared) and the in-process path."""

    def __init__(self, sandbox, seed: int):
        self._sandbox, self.seed = sandbox, seed

    @property
    def sandbox(self):
        return self._sandbox.get() if isinstance(self._sandbox, StartingSandbox) else self._sandbox

    def boxed(self, ex: Exercise, source: str, **kw) -> Verdict:
        from judge.grading import grade

        kw.setdefault("seed", self.seed)
        return grade(ex, source, sandbox=self.sandbox, **kw)

    def in_process(self, ex: Exercise, source: str, **kw) -> Verdict:
        from judge.grading import grade

        kw.setdefault("seed", self.seed)
        return grade(ex, source, sandbox=None, **kw)


def _check_reference(ex: Exercise, g: _Grader, work: Path) -> tuple[list[CheckResult], Verdict | None]:
    t0 = time.perf_counter()
    source = ex.solution_path.read_text()
    v = g.boxed(ex, source, mode="submit", out_dir=work / "ref-1")
    out = []
    if v.verdict == "accepted" and all(t.status == "passed" for t in v.tiers):
        out.append(_result("reference accepted", "passed",
                           f"seed {v.seed}, {sum(len(t.tests) for t in v.tiers)} tests, "
                           f"{v.timings.total_ms / 1000:.1f} s", t0))
    else:
        out.append(_result("reference accepted", "failed", f"{v.verdict}: {_failures(v)}", t0))
    t0 = time.perf_counter()  # the next two checks read the same run
    names = sorted(a.name for a in v.artifacts)
    if any(n.endswith(".vl.json") for n in names) and "metrics.json" in names:
        out.append(_result("T3 artifacts", "passed", ", ".join(names), t0))
    else:
        out.append(_result("T3 artifacts", "failed",
                           f"T3 wrote {names or 'nothing'}; it must write metrics.json and at least one "
                           f"view (the exercise's views/<name>.vl.json, bound to the metrics): T3 runs "
                           f"experiment.run(sub, ctx.out_dir)", t0))
    # limits
    lim = ex.limits
    total_s, cpu_s = v.timings.total_ms / 1000, v.resources.cpu_ms / 1000
    detail = (f"{total_s:.1f} s of {lim.total_seconds:g} s wall, {cpu_s:.1f} s of {lim.cpu_seconds} s CPU, "
              f"peak RSS {v.resources.peak_rss_mb:.0f} MB (limit {lim.memory_mb} MB over the zygote)")
    if v.error is not None and v.error.kind in ("time_limit", "memory_limit"):
        out.append(_result("limits", "failed", f"{v.error.kind}: {v.error.message}", t0))
    elif total_s > lim.total_seconds or cpu_s > lim.cpu_seconds:
        out.append(_result("limits", "failed", detail, t0))
    elif total_s > lim.total_seconds / 2 or cpu_s > lim.cpu_seconds / 2:
        out.append(_result("limits", "warning", detail + " (over half: slower machines may time out)", t0))
    else:
        out.append(_result("limits", "passed", detail, t0))
    return out, v


def _check_deterministic(ex: Exercise, g: _Grader, work: Path, first: Verdict) -> CheckResult:
    t0 = time.perf_counter()
    source = ex.solution_path.read_text()
    second = g.boxed(ex, source, mode="submit", out_dir=work / "ref-2")
    diff = None
    if normalized(first) != normalized(second):
        diff = "the reference: " + _first_difference(normalized(first), normalized(second))
    wrong = ex.wrong_solutions()[0]
    wsrc = wrong.source
    a = g.boxed(ex, wsrc, mode="submit", tiers=[wrong.expect_tier])
    b = g.boxed(ex, wsrc, mode="submit", tiers=[wrong.expect_tier])
    if diff is None and normalized(a) != normalized(b):
        diff = f"{wrong.label}: " + _first_difference(normalized(a), normalized(b))
    if diff:
        return _result("deterministic", "failed", f"seed {g.seed}, two runs differ at {diff}", t0)
    return _result("deterministic", "passed", f"seed {g.seed}: reference and {wrong.label}, "
                   f"two runs each, same documents apart from timings", t0)


def _check_other_seeds(ex: Exercise, g: _Grader) -> CheckResult:
    t0 = time.perf_counter()
    source = ex.solution_path.read_text()
    bad = []
    runs = [("submit", g.seed + 1), ("submit", g.seed + 2), ("run", None)]
    for mode, seed in runs:
        v = g.in_process(ex, source, mode=mode, seed=seed if seed is not None else ex.run_seed)
        if v.verdict != "accepted":
            bad.append(f"{mode} mode, seed {v.seed}: {_failures(v)}")
    if bad:
        return _result("other seeds", "failed", "the reference is rejected in " + "; ".join(bad), t0)
    return _result("other seeds", "passed", f"accepted with seeds {g.seed + 1}, {g.seed + 2} and in run "
                   f"mode (seed {ex.run_seed}, visible tests only)", t0)


def _check_starter(ex: Exercise, g: _Grader) -> CheckResult:
    t0 = time.perf_counter()
    v = g.boxed(ex, ex.starter_path.read_text(), mode="submit")
    if v.verdict != "rejected":
        return _result("starter rejected", "failed", f"the starter was {v.verdict}: {_failures(v)}", t0)
    # Every tier fails, and says which functions are still to write (not a crash of its own).
    passing = [t.tier for t in v.tiers if t.status != "failed"]
    messages = " ".join(r.message for t in v.tiers for r in t.tests)
    unnamed = [fn for fn in ex.function_names if f"{fn} is not implemented yet" not in messages]
    problems = ([f"tier(s) {', '.join(passing)} do not fail"] if passing else []) + \
        ([f"no test says {', '.join(unnamed)} is not implemented yet"] if unnamed else []) + \
        (["a test shows a traceback"] if "Traceback" in messages else [])
    if problems or v.error is not None:
        why = "; ".join(problems) or f"{v.error.kind}: {v.error.message[:200]}"
        return _result("starter rejected", "failed", f"the starter is rejected, but {why}", t0)
    return _result("starter rejected", "passed", f"fails {', '.join(t.tier for t in v.tiers)}, "
                   f"each function not implemented yet", t0)


def _check_wrong(ex: Exercise, g: _Grader) -> tuple[CheckResult, list[tuple[object, Verdict, object, float]]]:
    """Each known-wrong solution fails its declared tier; returns the check and, per solution,
    (the solution, its verdict, the diagnosis of that verdict, the diagnosis' cost in ms)."""
    from judge.diagnose import diagnose

    t0 = time.perf_counter()
    wrong = ex.wrong_solutions()
    bad, graded = [], []
    for w in wrong:
        v = g.boxed(ex, w.source, mode="submit", tiers=[w.expect_tier], diagnose=False)
        t1 = time.perf_counter()
        found = diagnose(ex, v)  # what grade() does, here with the match sets kept
        graded.append((w, v, found, (time.perf_counter() - t1) * 1000))
        tier = next(t for t in v.tiers if t.tier == w.expect_tier)
        if tier.status != "failed":
            why = _failures(v, 1) if v.verdict != "accepted" else "accepted"
            bad.append(f"{w.label} passes {w.expect_tier} (expect: {w.expect_tier}; "
                       f"tier {tier.status}{'; ' + why if why else ''})")
    if bad:
        return _result("known-wrong rejected", "failed", "; ".join(bad), t0), graded
    return _result("known-wrong rejected", "passed",
                   f"{len(wrong)}/{len(wrong)} fail their declared tier (seed {g.seed})", t0), graded


def honest_solutions(ex: Exercise) -> list[Path]:
    """Correct solutions besides the reference: ``tests/solutions/<slug>_*.py`` of the pack."""
    return sorted((ex.root.parent.parent / "tests" / "solutions").glob(f"{ex.slug}_*.py"))


def _check_diagnosis(ex: Exercise, g: _Grader, graded, reference: Verdict | None
                     ) -> tuple[CheckResult, DiagnosisReport]:
    """Each known-wrong solution is named as itself, or as a mistake that reproduces every failed
    test it reproduces (indistinguishable by these tests); honest solutions are never named."""
    t0 = time.perf_counter()
    diagnosed, missed, costs = 0, [], []
    for w, v, found, ms in graded:
        costs.append(ms)
        named = set(found.named.values())
        own = set(found.matches.get(w.name, ()))
        if w.name in named or (own and any(own <= set(found.matches.get(n, ())) for n in named)):
            diagnosed += 1
        else:
            missed.append(f"{w.name}: {'named ' + ', '.join(sorted(named)) if named else 'nothing named'}"
                          + ("" if own else " (it does not reproduce itself in-process)")
                          + (" (out of time)" if found.out_of_time else ""))
    honest_named = []
    verdicts = [("the reference", reference)] if reference is not None else []
    for path in honest_solutions(ex):
        verdicts.append((path.name, g.in_process(ex, path.read_text(), mode="submit",
                                                 tiers=["T0", "T1", "T2"])))
    rejected = []  # a correct style the tests reject: a false rejection
    for label, v in verdicts:
        names = sorted({r.misconception.name for t in v.tiers for r in t.tests if r.misconception})
        if names:
            honest_named.append(f"{label}: {', '.join(names)}")
        if label != "the reference" and v.verdict != "accepted":
            failed = [r.name for t in v.tiers for r in t.tests if r.status in ("failed", "error")]
            rejected.append(f"{label} ({v.verdict}: {', '.join(failed[:3]) or (v.error.message[:200] if v.error else '?')})")
    n = len(graded)
    costs.sort()
    rep = DiagnosisReport(wrong=n, diagnosed=diagnosed, rate=round(diagnosed / n, 3) if n else 0.0,
                          missed=missed, honest=len(verdicts), honest_named=honest_named,
                          median_ms=round(costs[len(costs) // 2], 1) if costs else 0.0,
                          max_ms=round(costs[-1], 1) if costs else 0.0)
    detail = (f"{diagnosed}/{n} known-wrong solutions named as themselves or an equivalent mistake "
              f"({round(100 * rep.rate)}%, target 90%); {rep.honest} honest solution(s), "
              f"{len(honest_named)} named; cost per rejected grading median {rep.median_ms:.0f} ms, "
              f"max {rep.max_ms:.0f} ms")
    if rejected:
        return _result("diagnosis", "failed", detail + "; correct solutions rejected: " + "; ".join(rejected), t0), rep
    if honest_named:
        return _result("diagnosis", "failed", detail + ": " + "; ".join(honest_named), t0), rep
    if n and rep.rate < 0.9:
        return _result("diagnosis", "warning", detail + "; missed: " + "; ".join(missed), t0), rep
    return _result("diagnosis", "passed", detail + ("; missed: " + "; ".join(missed) if missed else ""), t0), rep


# --- mutants ---------------------------------------------------------------------------------
class MutantTimeout(Exception):
    """An in-process mutant ran past the exercise's total time limit."""


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise MutantTimeout(f"the mutant ran past {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """Mutants break tests on purpose: keep the runner's tracebacks out of the author's terminal."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, lvl in zip(loggers, levels):
            lg.setLevel(lvl)


def grade_mutant(ex: Exercise, source: str, g: _Grader) -> str:
    """Grade a mutant in-process, tier by tier, stopping at the first tier that fails; returns
    what killed it ("" when it survived every tier)."""
    for tier in TIERS:
        try:
            with _time_limit(ex.limits.total_seconds):
                v = g.in_process(ex, source, mode="submit", tiers=[tier], diagnose=False)
        except MutantTimeout as e:
            return f"{tier} time limit ({e})"
        if v.verdict == "accepted":
            continue
        if v.error is not None:
            return f"{tier} {v.error.kind}: {v.error.message.splitlines()[0][:160] if v.error.message else ''}"
        tr = next(t for t in v.tiers if t.tier == tier)
        test = next((r for r in tr.tests if r.status in ("failed", "error")), None)
        return f"{tier} {test.name}" if test else f"{tier} {tr.status}"
    return ""


def _check_mutants(ex: Exercise, g: _Grader, equivalents: list[EquivalentMutant],
                   cap: int) -> tuple[CheckResult, MutationReport]:
    from judge.authoring import interface, mutate

    t0 = time.perf_counter()
    listed = {e.id: e.reason for e in equivalents}
    source = ex.solution_path.read_text()
    generated = (mutate.generate(source, ex.solution_path.name)
                 + interface.generate(source, [f.name for f in ex.functions], ex.solution_path.name))
    chosen = mutate.select(generated, cap)
    report = MutationReport(seed=g.seed, generated=len(generated), cap=cap, tested=len(chosen),
                            killed=0, survived=0, equivalent=0)
    ids = {m.id for m in generated}
    chosen_ids = {m.id for m in chosen}
    for eid in listed:
        if eid not in ids:
            report.warnings.append(f"{eid} is listed as equivalent but no such mutant exists any more "
                                   f"(the line moved or changed): update or remove it")
        elif eid not in chosen_ids:
            report.warnings.append(f"{eid} is listed as equivalent but was not graded (over the cap of {cap})")
    with _quiet("judge.runner", "judge.grading"):
        for m in chosen:
            t1 = time.perf_counter()
            killed_by = grade_mutant(ex, m.source, g)
            if killed_by:
                status: MutantStatus = "killed"
                report.killed += 1
                if m.id in listed:
                    report.warnings.append(f"{m.id} is listed as equivalent but is killed by {killed_by}: "
                                           f"remove it from mutants.toml")
            elif m.id in listed:
                status = "equivalent"
                report.equivalent += 1
            else:
                status = "survived"
                report.survived += 1
            report.mutants.append(MutantResult(
                id=m.id, operator=m.operator, line=m.line, before=m.before[:200], after=m.after[:200],
                status=status, killed_by=killed_by, reason=listed.get(m.id, ""),
                duration_ms=round((time.perf_counter() - t1) * 1000, 1)))
    capped = f" (capped at {cap}, a deterministic selection)" if len(chosen) < len(generated) else ""
    detail = (f"{report.generated} generated, {report.tested} graded{capped}: {report.killed} killed, "
              f"{report.equivalent} listed equivalent, {report.survived} survived")
    if report.survived:
        survivors = [m.id for m in report.mutants if m.status == "survived"]
        return _result("mutants", "failed", detail + ": " + ", ".join(survivors) +
                       f" (add a test that kills each, or list it in reference/{ex.slug}/mutants.toml as [[equivalent]] with a reason)",
                       t0), report
    if report.warnings:
        return _result("mutants", "warning", detail + "; " + "; ".join(report.warnings), t0), report
    return _result("mutants", "passed", detail, t0), report


# --- the whole run ---------------------------------------------------------------------------
def validate_exercise(folder: Path, *, sandbox, seed: int = DEFAULT_SEED,
                      max_mutants: int = DEFAULT_MAX_MUTANTS, mutants: bool = True) -> ExerciseReport:
    """Every check of one exercise folder; ``sandbox`` grades the reference, starter and
    known-wrong solutions (``None`` grades them in-process: trusted files only)."""
    t0 = time.perf_counter()
    folder = Path(folder).resolve()
    rep = ExerciseReport(slug=folder.name, path=str(folder), ok=False)
    check, ex, equivalents = _check_descriptor(folder)
    rep.checks.append(check)
    if ex is None:
        rep.duration_ms = round((time.perf_counter() - t0) * 1000, 1)
        return rep
    g = _Grader(sandbox, seed)
    rep.checks.append(_check_spec(ex))
    with tempfile.TemporaryDirectory(prefix=f"validate-{ex.slug}-") as tmp:
        work = Path(tmp)
        checks, first = _check_reference(ex, g, work)
        reference = first
        rep.checks += checks
        rep.checks.append(_check_deterministic(ex, g, work, first))
    rep.checks.append(_check_other_seeds(ex, g))
    rep.checks.append(_check_starter(ex, g))
    check, graded = _check_wrong(ex, g)
    rep.checks.append(check)
    check, rep.diagnosis = _check_diagnosis(ex, g, graded, reference)
    rep.checks.append(check)
    if mutants:
        accepted = next(c for c in rep.checks if c.name == "reference accepted")
        if accepted.status == "passed":  # the reference is accepted: mutants mean something
            check, rep.mutation = _check_mutants(ex, g, equivalents, max_mutants)
            rep.checks.append(check)
        else:
            rep.checks.append(CheckResult(name="mutants", status="skipped",
                                          detail="the reference is not accepted"))
    rep.ok = all(c.status != "failed" for c in rep.checks)
    rep.duration_ms = round((time.perf_counter() - t0) * 1000, 1)
    return rep


def validate(folders: list[Path], *, sandbox=None, seed: int = DEFAULT_SEED,
             max_mutants: int = DEFAULT_MAX_MUTANTS, mutants: bool = True,
             on_exercise=None) -> ValidationReport:
    """Validate ``folders`` with one sandbox for the whole run (started here unless given)."""
    import torch

    t0 = time.perf_counter()
    own = sandbox is None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # like the sandbox: in-process grading stays comparable and polite
    if own:  # start the zygote (~1-3 s) while the first exercise's descriptor is checked
        sandbox = StartingSandbox()
    try:
        reports = []
        for folder in folders:
            rep = validate_exercise(folder, sandbox=sandbox, seed=seed, max_mutants=max_mutants,
                                    mutants=mutants)
            reports.append(rep)
            if on_exercise is not None:
                on_exercise(rep)
    finally:
        torch.set_num_threads(threads)
        if own:
            sandbox.close()
    return ValidationReport(ok=bool(reports) and all(r.ok for r in reports), exercises=reports,
                            duration_ms=round((time.perf_counter() - t0) * 1000, 1))
