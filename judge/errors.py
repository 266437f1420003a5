"""The judge's small typed error tree. ``message`` is for users; tracebacks go to logs."""

from __future__ import annotations


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


class ExerciseError(JudgeError):
    """The exercise itself is broken (a folder, a test, the reference): the author's problem."""

    exit_code = 4


class SandboxError(JudgeError):
    """The sandbox could not be started or stopped answering for reasons not the submission's."""

    exit_code = 4


class SubmissionFailure(BaseException):
    """The submission could not run: the grading stops and the verdict carries ``kind``.

    A ``BaseException``, like ``KeyboardInterrupt``: a tier test's ``except Exception`` (e.g. one
    that turns a toy's crash into feedback, or ``expect_raises``) cannot swallow it.
    """

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # syntax_error | import_error | missing_function | time_limit | memory_limit | runtime_error
        self.message = message


class RemoteException(Exception):
    """An exception the submission raised inside a call (its type name and message only)."""

    remote_type = "Exception"
