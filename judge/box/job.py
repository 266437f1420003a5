"""One sandboxed child holding one submission, as the judge talks to it.

A ``Job`` sends requests over its own socket and reads the answers in order, within the
per-call and per-job deadlines; it drains the child's stdout/stderr into a capped buffer that is
never parsed, and learns of the child's end from the zygote's exit report, not from EOF.
``judge.box.sandbox.Sandbox`` forks jobs and cleans them up.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import shutil
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from judge.box import replies
from judge.errors import AnswerTooLarge, MalformedReply, SandboxError, SubmissionFailure
from judge.exercise import Limits
from sandbox import wire

log = logging.getLogger("judge.box.job")
OUTPUT_CAP = 64 << 10  # bytes of a submission's stdout/stderr kept
REPLY_HEADER_CAP = 1 << 20  # bytes of JSON in one answer's header (a 10,000-node tree is ~0.5 MB)
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def _wipe(path: Path) -> None:
    """Unmount the scratch tmpfs (as root) or remove the scratch dir without following links."""
    if os.path.ismount(path):
        _libc.umount2(str(path).encode(), MNT_DETACH)
        try:
            path.rmdir()
        except OSError:
            pass
    else:  # rmtree is fd-based with O_NOFOLLOW on Linux: a planted link is removed, not followed
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class ChildUsage:
    """What the sandboxed child used (``judge.models.Resources`` is the verdict's account of it)."""

    cpu_ms: float = 0.0  # CPU time of the sandboxed process
    maxrss_kb: int = 0  # its peak resident memory (shared pages of the zygote included)
    wall_ms: float = 0.0  # wall time from fork to exit


@dataclass(frozen=True)
class JobHost:
    """What a job needs from the sandbox that opened it, given when it is opened (so the job
    knows nothing else of the sandbox)."""

    kill: Callable[[str], None]  # ask the zygote to SIGKILL the child with this job id
    finish_later: Callable[["Job"], None]  # queue the closed job's clean-up (``Job.finish``)
    forget: Callable[["Job"], None]  # the job is cleaned up: drop it from the open ones
    spin_seconds: Callable[[], float]  # how long to poll for a reply before sleeping, now


@dataclass
class _Exit:
    status: int
    signal: int
    cpu_ms: float
    maxrss_kb: int
    oom: bool = False  # killed by its cgroup's OOM killer


class Job:
    """One sandboxed child holding one submission."""

    def __init__(self, host: JobHost, job_id: str, sock: socket.socket, out_r: int, scratch: Path,
                 limits: Limits):
        self.host, self.id, self.sock, self.scratch, self.limits = host, job_id, sock, scratch, limits
        self.layers: list[str] = []
        self.pid = 0
        self.started_at = time.monotonic()
        self.deadline = self.started_at + limits.total_seconds
        self._sent_at = self.started_at  # when the last request went out
        self._ru: tuple = (0.0, 0)  # (cpu ms, peak RSS kB) the child reported with its last answer (checked)
        self._resources = ChildUsage()  # what close() reports
        self.spare_key: tuple | None = None  # with spares: the next one is forked when this closes
        self._exited = threading.Event()
        self._exit: _Exit | None = None
        self._output = bytearray()
        self._output_dropped = 0
        os.set_blocking(out_r, False)
        self._out_fd = out_r  # drained while we wait for replies; no thread
        # Non-blocking for good: sends and reads wait in select() only when they must, against
        # the deadlines (no per-message timeout to set, no poll before every read).
        sock.setblocking(False)
        self.reader = wire.Reader(sock)  # every read of the socket goes through it
        self._cap_answers()
        self.closed = False

    @property
    def limits(self) -> Limits:
        return self._limits

    @limits.setter
    def limits(self, limits: Limits) -> None:
        """The exercise's limits (a spare forked for other limits takes the new ones when it is
        handed out, its answer caps with them)."""
        self._limits = limits
        if "reader" in self.__dict__:
            self._cap_answers()

    def _cap_answers(self) -> None:
        """No single answer larger than the exercise allows is read (``wire.FrameTooLarge``)."""
        cap = self._limits.answer_mb << 20
        self.reader.max_payload, self.reader.max_header = cap, min(REPLY_HEADER_CAP, cap)

    # --- events from the zygote ------------------------------------------------------------
    def on_event(self, msg: dict) -> None:
        """The zygote's report about this job's child: ``started`` (its pid), ``exited`` or
        ``failed`` (how it ended and what it used)."""
        ev = msg.get("event")
        if ev == "started":
            self.pid = int(_num(msg.get("pid", 0)))
        elif ev in ("exited", "failed"):
            self._exit = _Exit(int(_num(msg.get("status", -1))), int(_num(msg.get("signal", 0))),
                               _num(msg.get("cpu_ms", 0)), int(_num(msg.get("maxrss_kb", 0))),
                               msg.get("oom") is True)
            self._exited.set()
            try:
                self.sock.shutdown(socket.SHUT_RDWR)  # wakes a request waiting on this socket
            except OSError:
                pass

    def _drain(self) -> None:
        """Read what the child has written so far, keeping at most OUTPUT_CAP bytes."""
        while self._out_fd >= 0:
            try:
                chunk = os.read(self._out_fd, 65536)
            except BlockingIOError:
                return
            if not chunk:  # the child (and anything it left) is gone
                os.close(self._out_fd)
                self._out_fd = -1
                return
            room = max(OUTPUT_CAP - len(self._output), 0)
            self._output += chunk[:room]
            self._output_dropped += len(chunk) - len(chunk[:room])

    @property
    def exited(self) -> bool:
        """The zygote has reported the child's end."""
        return self._exited.is_set()

    @property
    def spin_seconds(self) -> float:
        """How long both sides poll for the next message before sleeping (the sandbox's, now)."""
        return self.host.spin_seconds()

    @property
    def output(self) -> str:
        text = self._output.decode("utf-8", "replace")
        if self._output_dropped:
            text += f"\n[… {self._output_dropped} more bytes of output dropped]"
        return text

    # --- requests --------------------------------------------------------------------------
    def wait_hello(self) -> None:
        """Wait for the child's first message, which names the isolation layers in force."""
        header, _ = self._receive(min(30.0, self.limits.total_seconds), during="start-up")
        try:  # sent before any submission code ran: a bad one is the sandbox's failure
            self.layers = list(replies.HELLO.check(header)["layers"])
        except MalformedReply as e:
            self.kill()
            raise SandboxError(f"the sandboxed child started badly: {e.message}") from None

    def request(self, header: dict, blobs: list[bytes] = (), *, during: str,
                expect: replies.Schema = replies.ANY) -> wire.Message:
        """Send one request and wait for its reply within the call and job deadlines; the reply
        is checked against ``expect`` (see ``reply``)."""
        self.send(header, blobs, during=during)
        return self.reply(during=during, expect=expect)

    def send(self, header: dict, blobs: list[bytes] = (), *, during: str,
             drain: Callable[[], bool] | None = None) -> None:
        """Send a request without waiting for its answer (``reply`` reads answers in order).

        ``drain``, for requests sent while earlier answers are unread: called when the child's
        input is full, it reads one owed answer (False: none is owed, so wait for room).
        """
        if self.closed:
            raise SubmissionFailure("runtime_error", "the submission's process has already ended")
        try:
            if drain is None:  # bounded by the job's limit
                wire.send_until(self.sock, wire.frame(header, blobs), max(self.deadline, time.monotonic() + 0.1))
            else:  # while the child's input is full, read the answers it owes
                wire.send_until(self.sock, wire.frame(header, blobs), self.deadline, on_full=drain)
        except TimeoutError:  # it stopped reading its input
            self.kill()
            raise SubmissionFailure("time_limit", f"{during} ran past the exercise's total limit "
                                    f"({self.limits.total_seconds:g} s)") from None
        except OSError:
            self._fail(during)
        self._sent_at = time.monotonic()

    def reply(self, *, during: str, since: float | None = None,
              expect: replies.Schema = replies.ANY) -> wire.Message:
        """The next answer, due within a call's limit of ``since`` (by default, when the last
        request went out) and within the job's limit. Its header is checked against ``expect``
        (``judge.box.replies``; by default only what every reply carries) and replaced by the
        checked copy; its tensor table against its payload. Anything malformed ends the job:
        ``MalformedReply``."""
        reply, payload = self._receive(self.limits.call_seconds, during=during,
                                       since=self._sent_at if since is None else since)
        if self.reader.received > self.limits.answers_mb << 20:  # held and decoded, in all
            self.kill()
            raise AnswerTooLarge(f"the submission's answers came to more than the "
                                 f"{self.limits.answers_mb} MB the exercise allows in one grading "
                                 f"(during {during})")
        try:
            reply = expect.check(reply, during)
            msg = wire.Message(reply, payload)
        except MalformedReply:
            self.kill()
            raise
        except wire.WireError as e:
            self.kill()
            raise MalformedReply(f"the submission's process sent a malformed reply during "
                                 f"{during}: {e}") from None
        self._ru = reply["ru"]  # its own (informational) resource use so far, checked
        return msg

    def _receive(self, call_seconds: float, *, during: str,
                 since: float | None = None) -> tuple[dict, bytearray]:
        deadline = min((since or time.monotonic()) + call_seconds, self.deadline)
        # Most replies come within microseconds: poll for a moment before sleeping in select()
        # (and an answer already read along with the previous one needs no wait at all).
        ready = [self.sock] if self.reader.poll(self.host.spin_seconds()) else []
        while not ready:  # wait for the reply, draining the child's output meanwhile
            remaining = deadline - time.monotonic()
            waiting = [self.sock] + ([self._out_fd] if self._out_fd >= 0 else [])
            ready = select.select(waiting, [], [], remaining)[0] if remaining > 0 else []
            if self._out_fd in ready:
                self._drain()
                ready = [r for r in ready if r is self.sock]
            elif not ready:
                self.kill()
                which = "its call limit" if deadline < self.deadline else "the exercise's total limit"
                raise SubmissionFailure("time_limit", f"{during} ran past {which} ({call_seconds:g} s "
                                        f"per call, {self.limits.total_seconds:g} s in all)")
        # The reply is complete once its first byte is here, unless the child dies or stalls
        # mid-frame.
        try:
            return self.reader.recv(deadline=max(deadline, time.monotonic() + 0.1))
        except TimeoutError:
            self.kill()
            raise SubmissionFailure("time_limit", f"{during} ran past its call limit "
                                    f"({call_seconds:g} s): its answer began but never ended") from None
        except wire.FrameTooLarge as e:
            self.kill()
            raise AnswerTooLarge(f"the submission's process sent an answer larger than the "
                                 f"exercise allows ({self.limits.answer_mb} MB) during {during}: "
                                 f"{e}") from None
        except (EOFError, OSError, wire.WireError):
            self._fail(during)

    def _fail(self, during: str):
        """The child is gone (or talking nonsense): say why, in the submission's terms."""
        self.kill()
        self._exited.wait(3.0)
        ex = self._exit
        if ex is None:
            raise SubmissionFailure("runtime_error", f"the submission's process stopped answering during {during}")
        if ex.signal == signal.SIGKILL and ex.cpu_ms >= self.limits.cpu_seconds * 1000 * 0.95 \
                or ex.signal == signal.SIGXCPU:
            raise SubmissionFailure("time_limit", f"CPU time limit ({self.limits.cpu_seconds} s) "
                                    f"exceeded during {during}")
        if ex.signal == signal.SIGKILL:
            if ex.oom:
                raise SubmissionFailure("memory_limit", f"memory limit ({self.limits.memory_mb} MB) "
                                        f"exceeded during {during}")
            raise SubmissionFailure("runtime_error", f"the submission's process was killed during {during}")
        if ex.signal:
            raise SubmissionFailure("runtime_error", f"the submission's process died of signal "
                                    f"{signal.Signals(ex.signal).name} during {during}")
        raise SubmissionFailure("runtime_error", f"the submission's process exited (status "
                                f"{ex.status}) during {during}; calling exit() is not allowed")

    # --- the end ---------------------------------------------------------------------------
    def kill(self) -> None:
        if not self._exited.is_set():
            self.host.kill(self.id)

    def close(self) -> ChildUsage:
        """End the child and report its resource use; the rest of the clean-up (waiting for the
        zygote's exit report, killing a child that lingers, wiping its scratch) runs in the
        background so the verdict does not wait for it."""
        if self.closed:
            return self._resources
        self.closed = True
        try:
            if not self._exited.is_set():
                try:  # not waited for: its last answer said what it used, and printed
                    wire.send_until(self.sock, wire.frame({"op": "exit"}), time.monotonic() + 0.1)
                except (OSError, TimeoutError):  # gone, or not reading: the clean-up kills it
                    pass
            self._drain()  # it flushed before its last answer: everything it printed is in the pipe
            ex = self._exit
            if ex is None:  # not reaped yet: its own (informational) report with its last answer
                ex = _Exit(0, 0, _num(self._ru[0]), int(_num(self._ru[1])))
            self._resources = ChildUsage(cpu_ms=ex.cpu_ms, maxrss_kb=ex.maxrss_kb,
                                        wall_ms=round((time.monotonic() - self.started_at) * 1000, 1))
        except Exception:  # noqa: BLE001 - a judge bug: the verdict stands, without the usage
            log.exception("closing job %s failed", self.id)
        finally:  # whatever happened above: reaped, killed if it lingers, wiped
            self.host.finish_later(self)
        return self._resources

    def finish(self) -> None:
        """The clean-up after ``close`` (run in the sandbox's background): wait for the exit
        report, kill a child that lingers, close the pipes, wipe the scratch."""
        failed: list[Exception] = []
        for step in (self._reap, self._close_fds, lambda: self.host.forget(self),
                     lambda: _wipe(self.scratch)):
            try:  # each step runs whatever the one before it raised
                step()
            except Exception as e:  # noqa: BLE001 - raised once every step has run
                failed.append(e)
        if failed:
            raise failed[0]

    def _reap(self) -> None:
        if not self._exited.wait(2.0):
            self.kill()
            self._exited.wait(5.0)

    def _close_fds(self) -> None:
        if self._out_fd >= 0:
            fd, self._out_fd = self._out_fd, -1
            os.close(fd)
        self.sock.close()


def _num(x) -> float:
    """A finite number from a report, or 0."""
    if type(x) in (int, float) and -1e15 < x < 1e15:  # NaN fails both comparisons
        return float(x)
    return 0.0
