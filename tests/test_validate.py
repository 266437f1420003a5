"""``judge validate``: every exercise passes it (this is how ``make test`` runs it), and each kind
of authoring mistake makes it fail with a message that names the problem."""

from __future__ import annotations

import json
import shutil

import pytest

from judge.cli import main
from judge.models import TestResult as Result  # aliased: not a pytest class
from judge.models import TierResult, Verdict
from judge.authoring.scaffold import new_exercise
from judge.authoring.validate import (_first_difference, exercise_folders, normalized, render,
                            render_exercise, validate, validate_exercise)

FOLDERS = exercise_folders()


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_exercise_validates(folder, sandbox):
    """`judge validate --all`, one exercise at a time: reference, starter, known-wrong solutions,
    determinism, other seeds, limits, artifacts, spec, and no unlisted surviving mutant. These are
    the sandboxed gradings of the reference (accepted, every tier), the starter (every tier fails,
    each function "not implemented yet") and each known-wrong solution (fails its declared tier):
    tests/test_grading.py does not grade them again."""
    rep = validate_exercise(folder, sandbox=sandbox)
    assert rep.ok, "\n" + render_exercise(rep)
    assert rep.mutation is not None and rep.mutation.survived == 0
    d = rep.diagnosis  # each known mistake is named (issue 19: >= 90%), an honest solution never
    assert d is not None and d.rate >= 0.9 and d.honest >= 1 and not d.honest_named, d
    checks = {c.name: c for c in rep.checks}
    assert {"reference accepted", "starter rejected", "known-wrong rejected"} <= set(checks)
    assert all(checks[n].status == "passed" for n in ("reference accepted", "starter rejected", "known-wrong rejected"))
    artifacts = checks["T3 artifacts"].detail.split(", ")
    assert "metrics.json" in artifacts and any(a.endswith(".vl.json") for a in artifacts), artifacts


def _scaffold(tmp_path, slug):
    new_exercise(slug, root=tmp_path)
    return tmp_path / "exercises" / slug, tmp_path / "reference" / slug


def _check(rep, name):
    return next(c for c in rep.checks if c.name == name)


def test_a_starter_that_fails_without_saying_not_implemented_fails_validation(tmp_path, sandbox):
    """The starter must fail every tier by saying which function is still to write: one that
    raises some other error fails the "starter rejected" check, naming what is missing."""
    ex_dir, _ = _scaffold(tmp_path, "val_starter")
    starter = ex_dir / "starter.py"
    starter.write_text(starter.read_text().replace(
        'raise NotImplementedError("masked_mean is not implemented yet")', 'raise ValueError("todo")'))
    rep = validate_exercise(ex_dir, sandbox=sandbox, mutants=False)
    check = _check(rep, "starter rejected")
    assert not rep.ok and check.status == "failed"
    assert "no test says masked_mean is not implemented yet" in check.detail


REDUNDANT = "total = torch.where(valid, torch.where(valid, x, zero), zero).sum(dim=-1)"


def test_a_surviving_mutant_fails_until_it_is_listed_as_equivalent(tmp_path, sandbox):
    ex_dir, ref_dir = _scaffold(tmp_path, "val_equivalent")
    sol = ref_dir / "solution.py"
    text = sol.read_text()
    line = next(i for i, s in enumerate(text.splitlines(), 1) if s.lstrip().startswith("total = "))
    sol.write_text(text.replace("total = torch.where(valid, x, zero).sum(dim=-1)", REDUNDANT))
    # the inner where dropped builds the same module as the outer one: one mutant (where->a);
    # either where replaced by a multiplication with the mask survives too
    ids = [f"solution.py:{line}:where->a", f"solution.py:{line}:where->mul", f"solution.py:{line}:where->mul#2"]

    rep = validate_exercise(ex_dir, sandbox=sandbox)
    mut = _check(rep, "mutants")
    assert not rep.ok and mut.status == "failed" and rep.mutation.survived == 3
    assert all(i in mut.detail for i in ids) and "mutants.toml" in mut.detail
    assert "SURVIVED" in render_exercise(rep)

    listed = "".join(f'\n[[equivalent]]\nid = "{i}"\nreason = "the outer where already selects x"\n'
                     for i in ids)
    (ref_dir / "mutants.toml").write_text(listed + '\n[[equivalent]]\nid = "solution.py:99:Lt->LtE"\nreason = "old"\n')
    rep = validate_exercise(ex_dir, sandbox=sandbox)
    assert rep.ok, render_exercise(rep)
    assert rep.mutation.equivalent == 3 and rep.mutation.survived == 0
    assert _check(rep, "mutants").status == "warning"
    assert any("solution.py:99:Lt->LtE" in w and "no such mutant" in w for w in rep.mutation.warnings)
    assert {m.reason for m in rep.mutation.mutants if m.status == "equivalent"} == \
        {"the outer where already selects x"}


def test_authoring_mistakes_fail_validation(tmp_path, sandbox):
    ex_dir, ref_dir = _scaffold(tmp_path, "val_mistakes")
    # a "wrong" solution that is right, and a spec that forgets the function
    shutil.copy(ref_dir / "solution.py", ref_dir / "wrong" / "not_wrong.py")
    text = (ref_dir / "wrong" / "not_wrong.py").read_text()
    (ref_dir / "wrong" / "not_wrong.py").write_text(text.replace('"""', '"""Not wrong at all.\n\nexpect: T2\n', 1))
    (ex_dir / "spec.md").write_text("# nothing here\n")
    rep = validate_exercise(ex_dir, sandbox=sandbox, mutants=False)
    assert not rep.ok
    assert _check(rep, "spec").status == "failed" and "masked_mean" in _check(rep, "spec").detail
    wrong = _check(rep, "known-wrong rejected")
    assert wrong.status == "failed" and "wrong/not_wrong.py passes T2" in wrong.detail
    assert _check(rep, "reference accepted").status == "passed"
    assert "mutants" not in [c.name for c in rep.checks]


def test_a_correct_solution_the_tests_reject_fails_validation(tmp_path, sandbox):
    """tests/solutions/<slug>_*.py are correct styles: one the tests reject is a false rejection."""
    ex_dir, ref_dir = _scaffold(tmp_path, "val_honest")
    solutions = tmp_path / "tests" / "solutions"
    solutions.mkdir(parents=True)
    shutil.copy(ref_dir / "solution.py", solutions / "val_honest_copy.py")  # accepted
    shutil.copy(ex_dir / "starter.py", solutions / "val_honest_unfinished.py")  # rejected
    rep = validate_exercise(ex_dir, sandbox=sandbox, mutants=False)
    d = _check(rep, "diagnosis")
    assert not rep.ok and d.status == "failed" and rep.diagnosis.honest == 3, d.detail
    assert "correct solutions rejected: val_honest_unfinished.py (rejected: " in d.detail
    assert "val_honest_copy.py" not in d.detail.split("correct solutions rejected:")[1]


def test_a_broken_descriptor_stops_validation_with_its_reason(tmp_path):
    ex_dir, _ = _scaffold(tmp_path, "val_descriptor")
    starter = ex_dir / "starter.py"
    starter.write_text(starter.read_text().replace("def masked_mean(", "def masked_average("))
    rep = validate_exercise(ex_dir, sandbox=None)
    assert not rep.ok and [c.name for c in rep.checks] == ["descriptor"]
    assert "the starter (starter.py) does not define masked_mean" in rep.checks[0].detail

    ex_dir, ref_dir = _scaffold(tmp_path, "val_equiv_table")
    with (ref_dir / "mutants.toml").open("a") as f:
        f.write('\n[[equivalent]]\nid = "solution.py:3:Lt->LtE"\n')
    rep = validate_exercise(ex_dir, sandbox=None)
    assert not rep.ok and "needs an id and a non-empty reason" in rep.checks[0].detail


def test_determinism_ignores_timings_only():
    def verdict(ms, message):
        return Verdict(exercise="x", verdict="rejected", mode="submit", seed=1, tiers=[
            TierResult(tier="T0", status="failed", duration_ms=ms,
                       tests=[Result(name="t", status="failed", message=message, duration_ms=ms)])])
    a, b = verdict(1.0, "expected 1, got 2"), verdict(9.0, "expected 1, got 2")
    a.timings.total_ms, b.timings.total_ms = 3.0, 4.0
    assert normalized(a) == normalized(b)
    c = verdict(1.0, "expected 1, got 3")
    assert "tiers[0].tests[0].message" in _first_difference(normalized(a), normalized(c))


def test_cli_exit_status_and_json(tmp_path, capsys):
    ex_dir, ref_dir = _scaffold(tmp_path, "val_cli")
    assert main(["validate"]) == 2
    shutil.copy(ref_dir / "solution.py", ex_dir / "starter.py")  # the starter is accepted
    rc = main(["validate", str(ex_dir), "--json", "--no-mutants"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1 and report["ok"] is False
    starter = next(c for c in report["exercises"][0]["checks"] if c["name"] == "starter rejected")
    assert starter["status"] == "failed" and "accepted" in starter["detail"]


def test_validate_renders_a_summary_table(tmp_path, sandbox):
    ex_dir, _ = _scaffold(tmp_path, "val_table")
    report = validate([ex_dir], sandbox=sandbox, max_mutants=3)
    text = render(report)
    assert report.ok and report.exercises[0].mutation.tested == 3
    assert "val_table" in text and "PASS" in text and "capped at 3" in text
    d = report.exercises[0].diagnosis  # the scaffold's two known mistakes are named as themselves
    assert (d.wrong, d.diagnosed, d.honest_named) == (2, 2, []) and "2/2   100%" in text
