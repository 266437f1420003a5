"""Caps on the text a verdict carries: whatever a submission makes the judge write (a test's
message, its printed output, an error) is cut with a note of how much was left out, and the
whole verdict's text has a ceiling, so a 1 KB submission can never produce a large document.
"""

from __future__ import annotations

from judge.models import Verdict

MESSAGE_CAP = 4000  # characters of one test's message
ERROR_CAP = 4000  # characters of the verdict's error message
OUTPUT_CAP = 70_000  # characters of the submission's output (the job keeps 64 KiB of bytes)
VERDICT_TEXT_CAP = 256_000  # characters of all of a verdict's messages, error and output together
MESSAGE_FLOOR = 200  # what each message keeps at least when the whole verdict is over its cap


def clip(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``limit`` and a note."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… {len(text) - limit} more characters"


def cap_verdict(verdict: Verdict) -> Verdict:
    """Cut every text field of ``verdict`` to its cap, then the test messages further, longest
    first, until the whole fits ``VERDICT_TEXT_CAP`` (in place; returns it)."""
    if verdict.error is not None:
        verdict.error.message = clip(verdict.error.message, ERROR_CAP)
    verdict.output = clip(verdict.output, OUTPUT_CAP)
    results = [r for t in verdict.tiers for r in t.tests]
    for r in results:
        r.message = clip(r.message, MESSAGE_CAP)
    budget = VERDICT_TEXT_CAP - len(verdict.output) - (len(verdict.error.message) if verdict.error else 0)
    total = sum(len(r.message) for r in results)
    if total > budget and results:
        # the largest per-message share that fits: messages shorter than it keep their length
        lengths = sorted(len(r.message) for r in results)
        share, left = max(budget, 0), len(lengths)
        for n in lengths:
            if n * left > share:
                break
            share -= n
            left -= 1
        per = max(share // max(left, 1), MESSAGE_FLOOR)
        for r in results:
            r.message = clip(r.message, per)
    return verdict
