"""The Sandbox: scratch left by a sandbox whose process was killed is wiped by the next one."""

from __future__ import annotations

import os
import subprocess
import sys

from judge.sandbox import Sandbox


def test_scratch_of_a_killed_sandbox_is_wiped_by_the_next(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale = tmp_path / f"judge-scratch-{dead}-abc123"
    (stale / "j1").mkdir(parents=True)
    (stale / "j1" / "left-behind").write_text("x")
    alive = tmp_path / f"judge-scratch-{os.getpid()}-def456"  # a running sandbox's: untouched
    (alive / "j1").mkdir(parents=True)
    box = Sandbox(scratch_root=str(tmp_path))
    try:
        assert not stale.exists()
        assert (alive / "j1").is_dir()
        assert box.scratch_root.name.startswith(f"judge-scratch-{os.getpid()}-")
    finally:
        box.close()
    assert not box.scratch_root.exists()
