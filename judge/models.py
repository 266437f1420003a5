"""The result document: one ``Verdict`` model is the schema of ``judge local --json``, the API and
the store. Its JSON Schema is published as ``docs/verdict.schema.json`` (``judge schema``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from judge.errors import FAILURE_KINDS, FailureKind

SCHEMA_VERSION = 1

TestStatus = Literal["passed", "failed", "error", "skipped"]
# The kinds that mean the submission could not run (exit status 3: ``SubmissionFailure.kind``),
# and "internal" when the judge itself failed.
ErrorKind = Literal[FailureKind, "internal"]
SUBMISSION_ERROR_KINDS = FAILURE_KINDS


class Misconception(BaseModel):
    name: str  # the known mistake's name in the exercise's catalogue, e.g. "clamp_instead_of_zero"
    why: str  # one sentence in a learner's words naming the mistake (the author's, never the oracle's values)
    spec_section: str = ""  # the spec.md heading the mistake goes against, e.g. "Formulas"


class TestResult(BaseModel):
    __test__ = False  # a result, not a test class: pytest does not collect it where it is imported

    name: str  # the test function's name, e.g. "test_strict_endpoints"
    status: TestStatus  # passed | failed | error (the test could not complete) | skipped
    message: str = ""  # what was expected, what came back, the smallest input that shows it
    visible: bool = True  # whether the learner sees this test in run mode
    duration_ms: float = 0.0  # wall time of the test
    # the known mistake this failure reproduces (judge.diagnose), null when none does
    misconception: Misconception | None = None


class TierResult(BaseModel):
    tier: Literal["T0", "T1", "T2", "T3"]  # T0 contracts, T1 oracle, T2 properties, T3 experiment
    status: TestStatus  # failed if any test failed or errored; skipped if none ran
    tests: list[TestResult] = Field(default_factory=list)  # in the order they ran
    duration_ms: float = 0.0  # wall time of the tier


class Artifact(BaseModel):
    name: str  # file name, e.g. "bandit.svg"
    path: str  # where it was written (judge local) or its storage key (service)
    media_type: str  # e.g. "image/png", "application/json"
    size: int = 0  # bytes


class SubmissionError(BaseModel):
    kind: ErrorKind  # why the submission could not run, or "internal" when the judge failed
    message: str  # a user-facing explanation; tracebacks go to the logs


class Timings(BaseModel):
    startup_ms: float = 0.0  # starting the judge: zygote and exercise loading (judge local)
    load_ms: float = 0.0  # forking the sandbox and importing the submission
    grading_ms: float = 0.0  # running the tiers
    render_ms: float = 0.0  # drawing the T3 plots, after the verdict was known
    diagnosis_ms: float = 0.0  # naming the known mistake a rejected submission reproduces (0 otherwise)
    total_ms: float = 0.0  # the whole grade() call


class Resources(BaseModel):
    cpu_ms: float = 0.0  # CPU time used by the sandboxed process
    peak_rss_mb: float = 0.0  # its peak resident memory, pages shared with the zygote included
    wall_ms: float = 0.0  # wall time of the sandboxed process
    calls: int = 0  # calls the tests made into the submission
    round_trips: int = 0  # requests to the sandbox for them (a batch of calls is one)


class Verdict(BaseModel):
    schema_version: int = SCHEMA_VERSION  # bumps when a field changes meaning
    exercise: str  # the exercise slug
    verdict: Literal["accepted", "rejected", "error"]  # error: the judge failed, never the submission
    mode: Literal["run", "submit"]  # run: visible cases and the experiment; submit: everything
    seed: int  # replays the run's random inputs with --seed
    tiers: list[TierResult] = Field(default_factory=list)  # T0..T3, in order
    artifacts: list[Artifact] = Field(default_factory=list)  # plots and metrics the submission produced
    artifacts_pending: bool = False  # the plots are still being drawn: fetch the result again
    error: SubmissionError | None = None  # why grading stopped early, if it did
    timings: Timings = Field(default_factory=Timings)  # where the time went
    resources: Resources = Field(default_factory=Resources)  # what the sandboxed process used
    sandbox: list[str] = Field(default_factory=list)  # the isolation layers that were in force
    output: str = ""  # the submission's stdout and stderr, capped; never parsed

    @property
    def exit_code(self) -> int:
        """0 accepted, 1 rejected, 3 rejected because it could not run, 4 the judge failed."""
        if self.verdict == "accepted":
            return 0
        if self.verdict == "error":
            return 4
        return 3 if self.error is not None and self.error.kind in SUBMISSION_ERROR_KINDS else 1
