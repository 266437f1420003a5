"""Naming the misconception (judge.diagnose): a rejected submission that reproduces a known
mistake is told which one, an honest or unknown one is told nothing, and the comparison of two
failures ignores how they travelled (sandbox or in-process) but not what they say."""

from __future__ import annotations

import pytest

from judge.diagnose import essence, same_failure
from judge.exercise import EXERCISES_DIR, load_exercise
from judge.grading import grade

GLM5 = load_exercise(EXERCISES_DIR / "glm5_mis")
GSPO = load_exercise(EXERCISES_DIR / "gspo")


def _named(v):
    return {r.name: r.misconception for t in v.tiers for r in t.tests if r.misconception is not None}


def test_a_failure_reads_the_same_through_the_sandbox_and_in_process():
    remote = ("sequence_ratio raised RuntimeError: where expected condition to be a boolean tensor "
              "(submission.py, line 34, in _seq_log_ratio)")
    local = "the test could not complete: RuntimeError: where expected condition to be a boolean tensor"
    assert essence(remote) == essence(local) == "RuntimeError: where expected condition to be a boolean tensor"
    assert same_failure("f must return a torch.Tensor, but it returned a Python float (did you call .item()?)",
                        "f on [3, 5] inputs must return a torch.Tensor, got a Python float (did you call .item()?)")
    assert same_failure("g modified its input(s) in place:\n  `old_logp` written at 2 of 8 positions",
                        "f modified its input(s) in place:\n  `old_logp` changed in place\n  (3 more calls)")


def test_numbers_agree_within_the_tolerance_and_words_exactly():
    assert same_failure("expected 0.731059, got 0.5 at (0, 1)", "expected 0.7310591, got 0.5000001 at (0, 1)")
    assert not same_failure("expected 0.731059, got 0.5", "expected 0.731059, got 0.51")
    assert same_failure("got nan at (2,)", "got nan at (2,)") and not same_failure("got nan", "got inf")
    assert not same_failure("expected ValueError, but nothing was raised", "expected ValueError, got 3")
    assert not same_failure("x: `logp` written", "x modified its input(s) in place: `mask`")


def test_a_known_mistake_is_named_on_the_tests_it_reproduces():
    w = GLM5.wrong_solution("inclusive_endpoints")
    v = grade(GLM5, w.source, sandbox=None, mode="submit", seed=7, tiers=["T2"])
    named = _named(v)
    assert v.verdict == "rejected" and named
    assert {m.name for m in named.values()} == {"inclusive_endpoints"}
    m = next(iter(named.values()))
    assert (m.why, m.spec_section) == (w.why, "Formulas")
    failed = [r for t in v.tiers for r in t.tests if r.name in named]
    assert all(f"This matches a known mistake: {w.why} (spec: Formulas)" in r.message for r in failed)
    assert v.timings.diagnosis_ms > 0


def test_honest_and_unknown_submissions_are_not_named():
    ref = GLM5.solution_path.read_text()
    v = grade(GLM5, ref, sandbox=None, mode="submit", seed=7)
    assert v.verdict == "accepted" and not _named(v) and v.timings.diagnosis_ms == 0
    # a mistake no catalogue entry makes: the loss doubled
    doubled = ref.replace("return -per_token.sum() / n_valid", "return -2 * per_token.sum() / n_valid")
    assert doubled != ref
    v = grade(GLM5, doubled, sandbox=None, mode="submit", seed=7, tiers=["T1"])
    assert v.verdict == "rejected" and not _named(v)


def test_diagnosis_can_be_turned_off():
    w = GLM5.wrong_solution("ratio_inverted")
    v = grade(GLM5, w.source, sandbox=None, mode="submit", seed=7, tiers=["T1"], diagnose=False)
    assert v.verdict == "rejected" and not _named(v) and v.timings.diagnosis_ms == 0


@pytest.mark.parametrize("name", ["float_mask_as_condition", "item_returned", "mutates_old_logp", "product_ratio"])
def test_a_sandboxed_submission_is_named_by_the_mistakes_replayed_in_process(name, sandbox):
    """An exception, a wrong return type, a write into an input and a wrong value: each reads
    differently through the sandbox, and is still recognised."""
    w = GSPO.wrong_solution(name)
    v = grade(GSPO, w.source, sandbox=sandbox, mode="submit", seed=11, tiers=[w.expect_tier])
    assert name in {m.name for m in _named(v).values()}, [r.message for t in v.tiers for r in t.tests][:3]


# The same mistakes written another way: on the independent solution (masked_fill style, tensor
# bounds, a Python-int count), not on the reference the catalogue's entries edit.
INDEPENDENT = (EXERCISES_DIR.parent / "tests" / "solutions" / "glm5_mis_independent.py").read_text()
REWRITTEN = {
    "inclusive_endpoints": ("ratio.gt(lo).logical_and(ratio.lt(hi))", "ratio.ge(lo).logical_and(ratio.le(hi))"),
    "clamp_instead_of_zero": ("return ratio.masked_fill(inside.logical_not(), 0.0)",
                              "return torch.clamp(ratio, lo, hi).masked_fill(pad, 0.0)"),
    "denominator_retained": ("n_tokens = int(torch.count_nonzero(pad.logical_not()))",
                             "n_tokens = int(torch.count_nonzero(w))"),
}


@pytest.mark.parametrize("mistake", sorted(REWRITTEN))
def test_a_mistake_written_differently_is_still_named(mistake):
    old, new = REWRITTEN[mistake]
    assert INDEPENDENT.count(old) == 1
    v = grade(GLM5, INDEPENDENT.replace(old, new), sandbox=None, mode="submit", seed=4321)
    assert v.verdict == "rejected" and {m.name for m in _named(v).values()} == {mistake}
