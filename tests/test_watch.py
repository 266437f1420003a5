"""``judge local --watch``: the judge stays warm and grades the file again on every save."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from judge.watch import Stamp, stamp, wait_for_save, watch

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = (ROOT / "reference/gspo/solution.py").read_text()
STARTER = (ROOT / "exercises/gspo/starter.py").read_text()


def _save(path: Path, text: str) -> None:
    before = stamp(path)
    path.write_text(text)
    if stamp(path) == before:  # same size within the file system's clock tick: move the clock on
        os.utime(path, ns=(time.time_ns(), (before.mtime_ns or 0) + 1_000_000))


def test_watch_grades_now_and_after_each_save(tmp_path):
    sol = tmp_path / "sol.py"
    sol.write_text("a = 1\n")
    seen: list[str] = []
    said: list[str] = []

    def grade_source(text: str, saved_at: float | None) -> int:
        assert (saved_at is None) == (not seen)  # a save's time, from the second grading on
        if saved_at is not None:
            said.append(f"graded {time.perf_counter() - saved_at:.3f} s after the save")
        seen.append(text)
        if len(seen) < 3:  # the next save, once this grading is done
            threading.Timer(0.05, _save, (sol, f"a = {len(seen) + 1}  # saved\n")).start()
        return len(seen) - 1

    code = watch(sol, grade_source, read=Path.read_text, say=said.append, max_gradings=3, poll=0.005)
    assert seen == ["a = 1\n", "a = 2  # saved\n", "a = 3  # saved\n"]
    assert code == 2  # the last grading's exit code
    assert sum(s.startswith("graded ") for s in said) == 2


def test_a_file_that_is_not_saved_again_is_not_graded_again(tmp_path):
    sol = tmp_path / "sol.py"
    sol.write_text("x = 1\n")
    assert wait_for_save(sol, stamp(sol), poll=0.005, deadline=time.monotonic() + 0.2) is None
    assert stamp(tmp_path / "absent.py") == Stamp(None, None)


def _ctrl_c_as_a_terminal_gives_it() -> None:
    """SIGINT as a terminal's Ctrl-C finds it: a suite started in the background (``make test &``)
    runs with SIGINT ignored, which its children inherit, and Python then installs no handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_judge_local_watch_shows_a_verdict_for_each_save(tmp_path):
    """The real command: the first table, then one per save (two saves, two more verdicts)."""
    sol = tmp_path / "sol.py"
    sol.write_text(REFERENCE)
    proc = subprocess.Popen([sys.executable, "-m", "judge.cli", "local", "--watch", "exercises/gspo", str(sol),
                             "--tiers", "T0", "--seed", "1", "--out", str(tmp_path / "out")],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_ctrl_c_as_a_terminal_gives_it)
    lines: queue.Queue = queue.Queue()
    for stream in (proc.stdout, proc.stderr):
        threading.Thread(target=lambda s=stream: [lines.put(x.rstrip("\n")) for x in s], daemon=True).start()

    def next_verdict(timeout: float = 180.0) -> tuple[str, list[str]]:
        got, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                assert proc.poll() is None, "judge local --watch exited:\n" + "\n".join(got)
                continue
            got.append(line)
            # the table is on stdout and "[watch] waiting" on stderr: read by two threads, either
            # may come first, so a verdict is complete once both are here
            heads = [x for x in got if x.startswith("gspo · submit · seed 1 · ")]
            if heads and any(x.startswith("[watch] waiting for") for x in got):
                assert len(heads) == 1, got
                return heads[0].rsplit(" · ", 1)[1], got
        raise AssertionError("no verdict in time:\n" + "\n".join(got))

    try:
        first, _ = next_verdict()
        assert first == "PASSED THE SELECTED TIERS"
        _save(sol, STARTER)
        second, out = next_verdict()
        assert second == "REJECTED" and any("is not implemented yet" in x for x in out)
        _save(sol, REFERENCE)
        third, out = next_verdict()
        assert third == "PASSED THE SELECTED TIERS"
        ms = [int(m.group(1)) for x in out if (m := re.match(r"\[watch\] save to table: (\d+) ms", x))]
        assert len(ms) == 1  # measured (and printed) for every grading after the first
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == 0  # the last grading passed
