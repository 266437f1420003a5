"""Caps on a verdict's text: each field cut with a note of what was left out, and the whole
verdict's text under one ceiling however many tests fail with long messages."""

from __future__ import annotations

from judge import caps
from judge.models import SubmissionError, TestResult, TierResult, Verdict


def test_clip_keeps_short_text_and_says_how_much_it_cut():
    assert caps.clip("short", 10) == "short"
    assert caps.clip("x" * 25, 10) == "x" * 10 + "… 15 more characters"


def _verdict(n_tests: int, length: int, output: str = "") -> Verdict:
    tests = [TestResult(name=f"test_{i}", status="failed", message=f"{i}:" + "m" * length)
             for i in range(n_tests)]
    return Verdict(exercise="x", verdict="rejected", mode="submit", seed=1, output=output,
                   tiers=[TierResult(tier="T1", status="failed", tests=tests)],
                   error=SubmissionError(kind="runtime_error", message="e" * 100_000))


def _text(v: Verdict) -> int:
    return (len(v.output) + len(v.error.message)
            + sum(len(r.message) for t in v.tiers for r in t.tests))


def test_each_field_is_cut_to_its_cap():
    v = caps.cap_verdict(_verdict(3, 10_000, output="o" * 200_000))
    assert len(v.error.message) < caps.ERROR_CAP + 40 and "more characters" in v.error.message
    assert len(v.output) < caps.OUTPUT_CAP + 40
    assert all(len(r.message) < caps.MESSAGE_CAP + 40 for r in v.tiers[0].tests)
    assert v.tiers[0].tests[2].message.startswith("2:mmm")


def test_the_whole_verdict_fits_its_cap_with_every_test_named():
    v = caps.cap_verdict(_verdict(400, 3_900, output="o" * 60_000))
    assert _text(v) < caps.VERDICT_TEXT_CAP + 400 * 40
    assert len(v.model_dump_json()) < 2 * caps.VERDICT_TEXT_CAP
    messages = [r.message for r in v.tiers[0].tests]
    assert all(m.startswith(f"{i}:") and "more characters" in m for i, m in enumerate(messages))
    assert min(len(m) for m in messages) >= caps.MESSAGE_FLOOR


def test_short_messages_keep_their_length_while_long_ones_share_the_rest():
    v = _verdict(100, 3_000)
    v.tiers[0].tests[0].message = "short and whole"
    caps.cap_verdict(v)
    assert v.tiers[0].tests[0].message == "short and whole"
    assert _text(v) <= caps.VERDICT_TEXT_CAP + 100 * 40


def test_a_small_verdict_is_unchanged():
    v = _verdict(5, 100)
    v.error.message = "e"
    before = v.model_dump_json()
    assert caps.cap_verdict(v).model_dump_json() == before
