"""judge/pids.py: a pid in use, ours or another's, reads as alive; a reaped one does not."""

from __future__ import annotations

import os
import subprocess

from judge.pids import alive


def test_alive_is_true_for_a_running_process_and_false_once_it_is_reaped():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert alive(proc.pid) and alive(os.getpid())
    finally:
        proc.kill()
        proc.wait()
    assert not alive(proc.pid)


def test_another_users_process_counts_as_alive():
    pid = os.fork()
    if pid == 0:  # a process we may not signal: another uid (as root), else init's pid 1
        try:
            if os.geteuid() == 0:
                os.setuid(65534)
            os._exit(0 if alive(1) else 1)  # pid 1 is never ours: EPERM, still alive
        except BaseException:  # noqa: BLE001
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
