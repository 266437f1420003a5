"""Every exercise tests itself, through the real sandbox: an independently written correct
solution is accepted, and the grading's modes, seeds and tier subsets behave. (The reference
accepted, the starter rejected and each known-wrong solution failing its declared tier are
``judge validate``'s checks: tests/test_validate.py grades them once, not here again.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from judge.exercise import discover
from judge.grading import grade

EXERCISES = discover()
SOLUTIONS = Path(__file__).parent / "solutions"


def summary(verdict) -> str:
    lines = [f"{verdict.verdict} error={verdict.error}"]
    for t in verdict.tiers:
        for r in t.tests:
            if r.status != "passed":
                lines.append(f"{t.tier} {r.name}: {r.status}: {r.message[:300]}")
    return "\n".join(lines)


@pytest.mark.parametrize("slug", sorted(EXERCISES))
def test_each_exercise_has_eight_wrong_solutions(slug):
    assert len(EXERCISES[slug].wrong_solutions()) >= 8


@pytest.mark.parametrize("slug", sorted(EXERCISES))
def test_independent_solution_is_accepted(slug, sandbox):
    path = SOLUTIONS / f"{slug}_independent.py"
    v = grade(EXERCISES[slug], path.read_text(), sandbox=sandbox, mode="submit")
    assert v.verdict == "accepted", summary(v)


def test_run_mode_runs_visible_tests_with_the_fixed_seed(sandbox):
    ex = EXERCISES["glm5_mis"]
    run = grade(ex, ex.solution_path.read_text(), sandbox=sandbox, mode="run")
    full = grade(ex, ex.solution_path.read_text(), sandbox=sandbox, mode="submit", seed=5)
    assert run.seed == ex.run_seed and run.verdict == "accepted"
    n_run = sum(len(t.tests) for t in run.tiers)
    n_full = sum(len(t.tests) for t in full.tiers)
    assert 0 < n_run < n_full
    assert all(r.visible for t in run.tiers for r in t.tests)


def test_a_seed_replays_the_same_result(sandbox):
    ex = EXERCISES["glm5_mis"]
    wrong = next(w for w in ex.wrong_solutions() if w.expect_tier == "T1")
    a = grade(ex, wrong.source, sandbox=sandbox, seed=99)
    b = grade(ex, wrong.source, sandbox=sandbox, seed=99)
    strip = lambda v: [(t.tier, [(r.name, r.status, r.message) for r in t.tests]) for t in v.tiers]
    assert strip(a) == strip(b) and a.seed == b.seed == 99


def test_tier_subset_skips_the_others(sandbox):
    ex = EXERCISES["glm5_mis"]
    v = grade(ex, ex.solution_path.read_text(), sandbox=sandbox, tiers=["T0"])
    assert [t.status for t in v.tiers] == ["passed", "skipped", "skipped", "skipped"]
    assert v.verdict == "accepted"


def test_a_byte_order_mark_or_windows_line_ends_mean_what_the_file_would(sandbox):
    """An editor's UTF-8 byte-order mark (Python ignores it in a file; compile() of a str would
    raise "invalid non-printable character U+FEFF") and CRLF line ends: the same verdict."""
    ex = EXERCISES["glm5_mis"]
    src = ex.solution_path.read_text()
    v = grade(ex, "\ufeff" + src.replace("\n", "\r\n"), sandbox=sandbox, tiers=["T0"])
    assert v.verdict == "accepted", summary(v)


def test_in_process_grading_matches_the_sandbox(sandbox):
    ex = EXERCISES["glm5_mis"]
    src = ex.solution_path.read_text()
    a = grade(ex, src, sandbox=None, seed=3)
    b = grade(ex, src, sandbox=sandbox, seed=3)
    assert a.verdict == b.verdict == "accepted"
    assert [len(t.tests) for t in a.tiers] == [len(t.tests) for t in b.tiers]


def test_the_verdict_comes_before_its_plots(sandbox, tmp_path):
    ex = EXERCISES["glm5_mis"]
    early = []
    v = grade(ex, ex.solution_path.read_text(), sandbox=sandbox, out_dir=tmp_path,
              on_verdict=lambda e: early.append((e, sorted(p.name for p in tmp_path.iterdir()))))
    assert len(early) == 1
    first, files_then = early[0]
    assert first.verdict == v.verdict == "accepted" and first.artifacts_pending
    assert first.artifacts == [] and files_then == []  # nothing drawn yet when the verdict is out
    assert not v.artifacts_pending and v.timings.render_ms > 0
    assert {a.name for a in v.artifacts} == {p.name for p in tmp_path.iterdir()}
    assert {"bandit.vl.json", "sweep.vl.json", "metrics.json"} <= {a.name for a in v.artifacts}
