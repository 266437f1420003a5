"""The API's request and response bodies. The result itself is ``judge.models.Verdict``: these
models only wrap it (a submission's status and links around its verdict) or describe exercises."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from judge.models import Verdict

Status = Literal["queued", "running", "done", "error"]


class ErrorBody(BaseModel):
    error: str = Field(description="a stable code, e.g. unknown_exercise, code_too_large, rate_limited")
    detail: str = Field(description="what went wrong, for a person")
    errors: list[dict] | None = Field(None, description="per-field problems of an invalid request")


class SubmitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    exercise: str = Field(description="the exercise slug, e.g. glm5_mis", max_length=64)
    code: str = Field(description="the submission's Python source text (UTF-8, no NUL character)",
                      json_schema_extra={"pattern": "^[^\\u0000]*$"})  # enforced by POST /submit itself
    mode: Literal["run", "submit"] = Field(
        "submit", description="run: the visible cases (fixed seed) and the experiment; submit: everything")


class Accepted(BaseModel):
    id: str
    status: Status


class Submission(BaseModel):
    id: str
    exercise: str
    mode: Literal["run", "submit"]
    status: Status = Field(description="queued, running, done (see verdict) or error (see message)")
    attempts: int = Field(description="how many times a worker took it up (an interrupted one is retried once)")
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    message: str | None = Field(None, description="why the judge could not grade it (status error)")
    verdict: Verdict | None = Field(None, description="the result document, when status is done")
    links: dict[str, str] = Field(default_factory=dict, description="self, events")


class SubmissionSummary(BaseModel):
    id: str
    exercise: str
    mode: Literal["run", "submit"]
    status: Status
    verdict: Literal["accepted", "rejected", "error"] | None = None
    created_at: datetime
    finished_at: datetime | None = None


class SubmissionPage(BaseModel):
    items: list[SubmissionSummary]
    next_cursor: str | None = Field(None, description="pass as ?cursor= for the next (older) page; opaque, "
                                       "and it names a position in your own list only")


class FunctionInfo(BaseModel):
    name: str
    signature: str
    returns: str


class LimitsInfo(BaseModel):
    call_seconds: float
    total_seconds: float
    cpu_seconds: int
    memory_mb: int


class Preview(BaseModel):
    name: str
    media_type: str
    size: int
    url: str


class ExerciseSummary(BaseModel):
    slug: str
    title: str
    summary: str
    tiers: list[str] = Field(description="the tiers that have tests, e.g. [T0, T1, T2, T3]")


class ExerciseDetail(ExerciseSummary):
    paper: str
    official: list[str]
    spec: str = Field(description="the learner's contract, in Markdown")
    starter: str = Field(description="the starter source")
    functions: list[FunctionInfo]
    limits: LimitsInfo
    previews: list[Preview] = Field(description="the reference's T3 artifacts (static previews)")
    previews_ready: bool = Field(description="false while the previews are still being built")


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    ready: bool
    database: bool
    workers: int = Field(description="configured grading workers")
    workers_ready: int = Field(description="workers whose sandbox zygote is warm")
