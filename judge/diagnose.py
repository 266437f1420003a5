"""Name the misconception: which known mistake a rejected submission reproduces (issue 19).

When a submission fails tests, the trusted judge process replays each failed test (T0-T2) with
every known-wrong solution of the exercise (``reference/<slug>/wrong.toml``, ``wrong/*.py``), in
this process, with the same seed and so the same inputs. A known-wrong solution *reproduces* the
submission on a test when it fails that test too and its failure says the same thing: the same
words and the same numbers within a tolerance (``same_failure``), the same raised exception, the
same first failing input. The failure messages carry what the test checked (values, gradients,
exceptions), so equal messages mean equal answers where the test looked.

The candidate that reproduces the most failed tests wins (ties: catalogue order), and each failed
test it reproduces gets ``misconception = {name, why, spec_section}`` and one line of feedback.
Nothing is named when nothing reproduces a test. The name and the ``why`` are a hint written by
the author; the oracle's values are never added.

Cost: only rejected gradings pay, at most ``MAX_REPLAYS`` test replays (a count, so that one seed
always gets the same diagnosis): the first failed test of each tier is replayed first, with every
candidate; once some reproduce a test, only they are tried on
the next. Passing gradings never reach this module.

Known-wrong solutions run here, in the judge's process, like the reference and the oracle do:
never in the sandbox's zygote, which imports none of them and is the only process that forks.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

from judge.caps import MESSAGE_CAP, clip
from judge.errors import JudgeError, RemoteException, SubmissionFailure
from judge.exercise import Exercise
from judge.models import Misconception, TestResult, Verdict
from judge.readonly import InProcess
from judge.testing import Context, Feedback

log = logging.getLogger("judge.diagnose")

MAX_REPLAYS = 60  # test replays per grading at most: the diagnosis of a seed is deterministic
SAFETY_S = 10.0  # and a wall-clock stop that only a pathologically slow exercise reaches
MAX_TESTS = 6  # failed tests replayed at most (the first of each tier first)
REL_TOL = 1e-3  # numbers in two failure messages agree within this relative difference...
ABS_TOL = 1e-6  # ...or this absolute one (printed values are rounded to ~6 digits)
DIAGNOSED_TIERS = ("T0", "T1", "T2")  # T3 runs a whole toy per test: too slow to replay
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan)")
_UNCOMPLETED = "the test could not complete: "


@dataclass
class Diagnosis:
    named: dict[str, str]  # failed test -> the known mistake named on it
    matches: dict[str, list[str]]  # known mistake -> the failed tests it reproduces
    replays: int = 0  # tests replayed
    out_of_time: bool = False  # the replay budget ran out before every candidate was tried


@dataclass(frozen=True)
class Outcome:
    status: str  # "passed", "failed" or "error"
    message: str  # the failure as the learner would read it (clipped like the runner's)


_LOCATION = re.compile(r" \((?:[\w./<>-]+\.py|<[\w-]+>), line \d+, in [\w<>.]+\)")
_RAISED = re.compile(r"\b[A-Za-z_]\w* raised ([A-Za-z_]\w*): ")
_TWICE = re.compile(r"\b([A-Za-z_]\w*): \1: ")
_RETURNED = re.compile(r"must return (?:a |an )?([\w.]+)\b.*?(?:returned|got) (?:a |an )?([\w. ]+?)(?: \(|,|$)",
                       re.DOTALL)


def essence(message: str) -> str:
    """What a failure says about the submission, without how it travelled: through the sandbox an
    exception reads "f raised T: msg (submission.py, line 3, in f)", in this process "the test
    could not complete: T: msg"; both become "T: msg". A write into an input is the names of the
    inputs written; a wrong return type, the types."""
    text = message.split("\nThis matches a known mistake:")[0].strip()
    text = re.sub(r"\n  in your code, from the call.*?(?=\n\S|$)", "", text, flags=re.DOTALL)  # child.TRACE_HEADER
    if "modified its input(s) in place" in text:
        return "wrote into " + ", ".join(sorted(set(re.findall(r"`(\w+)`", text))))
    m = _RETURNED.search(text)
    if m:
        return f"returned {m.group(2).strip()} instead of {m.group(1)}"
    if text.startswith(_UNCOMPLETED):
        text = text[len(_UNCOMPLETED):]
    text = _RAISED.sub(r"\1: ", _LOCATION.sub("", text))
    return _TWICE.sub(r"\1: ", text)


def _numbers(text: str) -> tuple[list[str], list[float]]:
    words, numbers, last = [], [], 0
    for m in _NUMBER.finditer(text):
        words.append(text[last:m.start()])
        numbers.append(float(m.group()))
        last = m.end()
    words.append(text[last:])
    return words, numbers


def same_failure(a: str, b: str) -> bool:
    """Whether two failure messages say the same (``essence``): the same words, the same numbers
    within ``REL_TOL``/``ABS_TOL`` (NaN equals NaN, an infinity only itself)."""
    if a == b:
        return True
    a, b = essence(a), essence(b)
    if a == b:
        return True
    (wa, na), (wb, nb) = _numbers(a), _numbers(b)
    if wa != wb or len(na) != len(nb):
        return False
    for x, y in zip(na, nb):
        if math.isnan(x) or math.isnan(y):
            if not (math.isnan(x) and math.isnan(y)):
                return False
        elif math.isinf(x) or math.isinf(y):
            if x != y:
                return False
        elif abs(x - y) > max(ABS_TOL, REL_TOL * max(abs(x), abs(y))):
            return False
    return True


def replay(exercise: Exercise, impl: Any, test: Callable, *, seed: int, mode: str) -> Outcome:
    """Run one test against a trusted in-process implementation, as the runner would."""
    sub = InProcess(impl, exercise.functions)
    ctx = Context(seed=seed, mode=mode, out_dir=None, exercise=exercise.slug)
    available = {"sub": sub, "ctx": ctx, "ref": exercise.ref, "oracle": exercise.oracle,
                 "experiment": exercise.experiment}
    import inspect

    kwargs = {p: available[p] for p in inspect.signature(test).parameters if p in available}
    status, message = "passed", ""
    try:
        test(**kwargs)
    except (SubmissionFailure, RemoteException) as e:
        status, message = "failed", getattr(e, "message", str(e))
    except (Feedback, AssertionError) as e:
        status, message = "failed", str(e) or f"{test.__name__} failed"
    except Exception as e:  # noqa: BLE001 - what the known mistake raised
        status, message = "error", f"{_UNCOMPLETED}{type(e).__name__}: {e}"
    writes = sub.__judge_violations__()
    if writes:
        status, message = "failed", writes[0] + (f"\n  ({len(writes) - 1} more calls of this "
                                                 f"test wrote into their inputs)" if len(writes) > 1 else "")
    return Outcome(status, clip(message, MESSAGE_CAP))


def _module(exercise: Exercise, w) -> Any:
    digest = hashlib.sha1(w.source.encode()).hexdigest()[:12]  # a changed entry is loaded afresh
    return w.load(f"_judge_wrong_{exercise.slug}_{w.name}_{digest}")


def _failed(verdict: Verdict) -> list[tuple[str, TestResult]]:
    """The failed tests worth replaying, the first of each tier first."""
    by_tier = [[(t.tier, r) for r in t.tests if r.status in ("failed", "error") and r.message
                and r.message != "a hidden test failed"]
               for t in verdict.tiers if t.tier in DIAGNOSED_TIERS]
    order = [col[0] for col in by_tier if col] + [x for col in by_tier for x in col[1:]]
    return order[:MAX_TESTS]


def diagnose(exercise: Exercise, verdict: Verdict, *, max_replays: int = MAX_REPLAYS) -> Diagnosis:
    """Set ``misconception`` on the failed tests a known mistake reproduces."""
    found = Diagnosis(named={}, matches={})
    failed = _failed(verdict)
    if not failed:
        return found
    try:
        wrong = exercise.wrong_solutions()
        tests = {fn.__name__: fn for fns in _collect(exercise).values() for fn in fns}
    except JudgeError as e:
        log.warning("no diagnosis for %s: %s", exercise.slug, e.message)
        return found
    # A known mistake fails its declared tier (judge validate checks it): one whose tier this
    # submission passed is not what it did. Among equals, one declared for the first tier the
    # submission failed explains it best; one declared earlier would have failed a tier it passed.
    passed = {t.tier for t in verdict.tiers if t.status == "passed"}
    wrong = [w for w in wrong if w.expect_tier not in passed]
    first = failed[0][0]
    deadline = time.perf_counter() + SAFETY_S
    matches: dict[str, list[TestResult]] = {}  # name -> the failed tests it reproduces
    pool = wrong  # after a test some mistakes reproduce, only they are tried on the next ones
    for _tier, result in failed:
        test = tests.get(result.name)
        if test is None:
            continue
        matched = []
        for w in pool:
            if found.replays >= max_replays or time.perf_counter() > deadline:
                found.out_of_time = True
                break
            found.replays += 1
            try:
                out = replay(exercise, _module(exercise, w), test, seed=verdict.seed, mode=verdict.mode)
            except JudgeError as e:  # a broken catalogue entry names nothing, never fails grading
                log.warning("diagnosis of %s skipped %s: %s", exercise.slug, w.label, e.message)
                continue
            if out.status != "passed" and same_failure(out.message, result.message):
                matches.setdefault(w.name, []).append(result)
                matched.append(w)
        pool = matched or pool
    found.matches = {n: [r.name for r in rs] for n, rs in matches.items()}
    rank = {w.name: i for i, w in enumerate(wrong)}
    by_name = {w.name: w for w in wrong}

    def tier_fit(n: str) -> int:
        tier = by_name[n].expect_tier
        return 0 if tier == first else 1 if tier > first else 2

    for name in sorted(matches, key=lambda n: (-len(matches[n]), tier_fit(n), rank[n])):
        w = by_name[name]
        for result in matches[name]:
            if result.misconception is None:
                result.misconception = Misconception(name=w.name, why=w.why, spec_section=w.spec_section)
                section = f" (spec: {w.spec_section})" if w.spec_section else ""
                result.message = f"{result.message}\nThis matches a known mistake: {w.why}{section}"
                found.named[result.name] = w.name
    return found


def _collect(exercise: Exercise) -> dict[str, list[Callable]]:
    from judge.runner import collect

    return collect(exercise)
