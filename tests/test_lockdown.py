"""The layers a child applies to itself: the seccomp filter, compiled once and loaded as is."""

import errno
import os
import socket

import pytest

from sandbox import lockdown

pytest.importorskip("pyseccomp")


def _in_child(check) -> int:
    """Run ``check`` in a forked child; its exit status (0: every expectation held)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = check()
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _expect_errno(fn, err: int) -> bool:
    try:
        fn()
    except OSError as e:
        return e.errno == err
    return False


def _confined(load) -> int:
    """Load a filter with ``load(own_pid)``, then try what it must refuse and allow."""
    def check() -> int:
        me = os.getpid()
        load(me)
        refused = [
            _expect_errno(os.fork, errno.EPERM),
            _expect_errno(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM), errno.EAFNOSUPPORT),
            _expect_errno(lambda: os.kill(os.getppid(), 0), errno.EPERM),
            _expect_errno(lambda: os.setsid(), errno.EPERM),
        ]
        a, b = socket.socketpair()  # AF_UNIX stays allowed, and so do signals to itself
        os.kill(me, 0)
        return 0 if all(refused) and a.send(b"x") == 1 else 3
    return _in_child(check)


def test_a_precompiled_program_refuses_what_the_filter_refuses():
    program = lockdown.compile_seccomp(1)  # what a zygote compiles for its PID-1 children
    assert program and len(program) % 8 == 0
    assert _confined(lambda pid: lockdown.load_seccomp_program(lockdown.compile_seccomp(pid))) == 0


def test_the_filter_compiled_in_the_child_refuses_the_same():
    f = lockdown.build_seccomp_filter()
    assert _confined(lambda pid: lockdown.load_seccomp(f, pid)) == 0


def test_both_ways_give_the_same_program():
    import pyseccomp as sc  # noqa: F401 - the filter's own export, for comparison
    f = lockdown.build_seccomp_filter()
    lockdown._signal_rules(f, 1)
    fd = os.memfd_create("cmp")
    with os.fdopen(os.dup(fd), "rb") as out:
        f.export_bpf(out)
    assert os.pread(fd, 1 << 20, 0) == lockdown.compile_seccomp(1)
    os.close(fd)
