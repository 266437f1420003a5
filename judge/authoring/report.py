"""What ``judge validate`` reports (``ValidationReport`` and its parts) and the table it prints.

``judge.authoring.validate`` runs the checks and fills these models; ``render`` turns a report
into the per-exercise check list and the summary table ``judge validate`` prints.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

CheckStatus = Literal["passed", "failed", "warning", "skipped"]
MutantStatus = Literal["killed", "survived", "equivalent"]


class CheckResult(BaseModel):
    name: str  # "descriptor", "reference accepted", ...
    status: CheckStatus  # a warning does not fail validation
    detail: str = ""  # what was found; for a failure, what to fix
    duration_ms: float = 0.0  # how long the check took


class MutantResult(BaseModel):
    id: str  # "solution.py:42:LtE->Lt": the id to list in [[equivalent_mutants]]
    operator: str  # comparison | minmax | clamp | detach | mask | summean | constant
    line: int  # the reference's line the mutant changes
    before: str  # the expression in the reference
    after: str  # the mutant's expression
    status: MutantStatus  # equivalent: survived and listed in exercise.toml
    killed_by: str = ""  # "T1 test_random_cases_match_oracle", or why it could not run
    reason: str = ""  # the listed reason, for an equivalent mutant
    duration_ms: float = 0.0  # how long grading it took


class MutationReport(BaseModel):
    seed: int  # the seed every mutant is graded with
    generated: int  # mutants the operators produce
    cap: int  # at most this many are graded (0: no cap); the selection is deterministic
    tested: int  # mutants graded
    killed: int  # graded mutants some tier rejects
    survived: int  # survivors not listed as equivalent: these fail validation
    equivalent: int  # survivors listed as equivalent
    mutants: list[MutantResult] = Field(default_factory=list)  # one per graded mutant
    warnings: list[str] = Field(default_factory=list)  # stale or wrongly listed equivalents


class DiagnosisReport(BaseModel):
    wrong: int  # known-wrong solutions graded as submissions (their declared tier, the validation seed)
    diagnosed: int  # named as themselves, or as a mistake that reproduces every test they reproduce
    rate: float  # diagnosed / wrong (target >= 0.9)
    missed: list[str] = Field(default_factory=list)  # "name: what was named instead (or nothing)"
    honest: int = 0  # honest solutions graded (the reference, tests/solutions/<slug>_*.py)
    honest_named: list[str] = Field(default_factory=list)  # honest solutions named a mistake: never
    median_ms: float = 0.0  # the diagnosis' cost on one rejected grading, median over the known-wrong
    max_ms: float = 0.0  # ... and the largest


class ExerciseReport(BaseModel):
    slug: str  # the exercise folder's name
    path: str  # the folder validated
    ok: bool  # no check failed
    checks: list[CheckResult] = Field(default_factory=list)  # in the order they ran
    mutation: MutationReport | None = None  # None: mutants not graded (off, or the reference failed)
    diagnosis: DiagnosisReport | None = None  # None: the known-wrong solutions were not graded
    duration_ms: float = 0.0  # the exercise's checks in all


class ValidationReport(BaseModel):
    ok: bool  # at least one exercise, and every one valid
    exercises: list[ExerciseReport] = Field(default_factory=list)  # in the order given
    duration_ms: float = 0.0  # the whole run


# --- the table -------------------------------------------------------------------------------
_MARK = {"passed": "✓", "failed": "✗", "warning": "!", "skipped": "-"}


def render_exercise(rep: ExerciseReport, *, verbose: bool = False) -> str:
    lines = [f"{rep.slug}  {'PASS' if rep.ok else 'FAIL'}  ({rep.duration_ms / 1000:.1f} s)  {rep.path}"]
    for c in rep.checks:
        lines.append(f"  {_MARK[c.status]} {c.name:<21} {c.duration_ms / 1000:>6.1f} s  {c.detail}")
    m = rep.mutation
    if m is not None:
        for r in m.mutants:
            if r.status == "survived" or verbose:
                tag = {"survived": "SURVIVED", "killed": "killed", "equivalent": "equivalent"}[r.status]
                why = r.killed_by if r.status == "killed" else r.reason
                lines.append(f"      {tag:<10} {r.id:<34} `{r.before[:50]}` -> `{r.after[:50]}`"
                             + (f"  [{why}]" if why else ""))
    return "\n".join(lines)


def render(report: ValidationReport, *, verbose: bool = False) -> str:
    """Every exercise's checks, then the summary table."""
    parts = [render_exercise(r, verbose=verbose) for r in report.exercises]
    return "\n".join(parts) + "\n\n" + render_summary(report)


def render_summary(report: ValidationReport) -> str:
    """One line per exercise: checks passed, mutants graded/generated, killed, equivalent, survived,
    known-wrong solutions diagnosed as themselves."""
    lines = []
    lines.append(f"{'exercise':<18} {'result':<6} {'checks':>7} {'mutants':>8} {'killed':>7} "
                 f"{'equiv':>6} {'survived':>9} {'diagnosed':>10} {'time':>8}")
    for r in report.exercises:
        passed = sum(c.status in ("passed", "warning") for c in r.checks)
        m = r.mutation
        cols = (f"{m.tested:>3}/{m.generated:<4} {m.killed:>7} {m.equivalent:>6} {m.survived:>9}"
                if m else f"{'-':>8} {'-':>7} {'-':>6} {'-':>9}")
        d = r.diagnosis
        diag = f"{d.diagnosed:>4}/{d.wrong:<3} {round(100 * d.rate):>2}%" if d else f"{'-':>10}"
        lines.append(f"{r.slug:<18} {'PASS' if r.ok else 'FAIL':<6} {passed:>3}/{len(r.checks):<3} {cols} "
                     f"{diag} {r.duration_ms / 1000:>7.1f}s")
    n_ok = sum(r.ok for r in report.exercises)
    lines.append(f"{n_ok}/{len(report.exercises)} exercises valid in {report.duration_ms / 1000:.1f} s")
    return "\n".join(lines)
