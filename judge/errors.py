"""The judge's small typed error tree. ``message`` is for users; tracebacks go to logs."""

from __future__ import annotations

from typing import Literal, get_args

# Why a submission could not run; each is the submission's doing, never the judge's (the
# verdict's ``error.kind`` is one of these, or "internal" when the judge itself failed).
FailureKind = Literal["syntax_error", "import_error", "missing_function", "time_limit",
                      "memory_limit", "runtime_error"]
FAILURE_KINDS: tuple[str, ...] = get_args(FailureKind)


class JudgeError(Exception):
    """Base of every error the judge reports to a user."""

    exit_code = 4

    @property
    def message(self) -> str:
        return str(self)


class UsageError(JudgeError):
    """Bad input from the user: unknown exercise, missing file, bad option."""

    exit_code = 2


class UnknownExercise(UsageError):
    pass


class ServiceError(JudgeError):
    """``judge submit``: the judge service could not be reached, or failed to grade."""

    exit_code = 4


class ExerciseError(JudgeError):
    """The exercise itself is broken (a folder, a test, the reference): the author's problem."""

    exit_code = 4


class SandboxError(JudgeError):
    """The sandbox could not be started or stopped answering for reasons not the submission's."""

    exit_code = 4


class IsolationUnavailable(SandboxError):
    """The machine cannot provide an isolation layer the caller requires (Landlock, seccomp):
    the service refuses to grade untrusted code rather than run it weakly."""


class BlobError(JudgeError):
    """A file the service keeps (an artifact, a preview: ``judge.service.blobs``) was refused:
    a bad name, over a size cap, or one of that name is kept already."""


class BlobExists(BlobError):
    """A kept file or set is never overwritten: what a reader streams cannot change under it."""


class BlobTooLarge(BlobError):
    """A file over its cap, or a set over its caps on files or bytes."""


class SubmissionFailure(BaseException):
    """The submission could not run: the grading stops and the verdict carries ``kind``.

    A ``BaseException``, like ``KeyboardInterrupt``: a tier test's ``except Exception`` (e.g. one
    that turns a toy's crash into feedback, or ``expect_raises``) cannot swallow it.
    """

    def __init__(self, kind: FailureKind, message: str):
        if kind not in FAILURE_KINDS:  # a judge bug: every raise names one of the kinds
            raise ValueError(f"unknown submission failure kind {kind!r}")
        super().__init__(message)
        self.kind: FailureKind = kind
        self.message = message


class MalformedReply(SubmissionFailure):
    """The sandboxed process sent something the protocol does not allow (a forged or corrupt
    frame, a field of the wrong type, out of range or too long): the submission's fault."""

    def __init__(self, message: str):
        super().__init__("runtime_error", message)


class AnswerTooLarge(SubmissionFailure):
    """The submission's answers exceed what the judge decodes and holds for one grading."""

    def __init__(self, message: str):
        super().__init__("memory_limit", message)


class RemoteException(Exception):
    """An exception the submission raised inside a call (its type name and message only)."""

    remote_type = "Exception"
