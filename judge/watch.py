"""``judge local --watch``: grade a file again every time it is saved, with the judge kept warm.

The zygote, the exercise's tests, reference and oracle are loaded once; each save costs one
grading (fork, load, tiers) and the table is printed before anything else is done (the plots are
drawn after it). Saves are found by polling the file's modification time and size (no inotify:
it works the same on every file system and editor, which may replace the file on save).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

POLL_SECONDS = 0.02  # how often the file is looked at between gradings
SETTLE_SECONDS = 0.01  # an editor that writes in pieces: the file is read once it stops changing


@dataclass(frozen=True)
class Stamp:
    """What a save changes: the file's modification time and size (None: it does not exist)."""

    mtime_ns: int | None
    size: int | None


def stamp(path: Path) -> Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return Stamp(None, None)
    return Stamp(st.st_mtime_ns, st.st_size)


def wait_for_save(path: Path, last: Stamp, *, poll: float = POLL_SECONDS,
                  deadline: float | None = None) -> Stamp | None:
    """Block until ``path`` differs from ``last`` and exists; its new stamp (None at ``deadline``)."""
    while deadline is None or time.monotonic() < deadline:
        now = stamp(path)
        if now != last and now.mtime_ns is not None:
            time.sleep(SETTLE_SECONDS)
            again = stamp(path)
            if again == now:
                return now
            continue
        time.sleep(poll)
    return None


def watch(path: Path, grade_source: Callable[[str, float | None], int], *, read: Callable[[Path], str],
          say: Callable[[str], None], max_gradings: int | None = None,
          poll: float = POLL_SECONDS) -> int:
    """Grade ``path`` now and after every save: ``grade_source(text, saved_at)`` prints the table
    and returns the exit code (``saved_at``: the save's ``time.perf_counter()``, None the first
    time, for it to say how long the table took). Returns the last exit code (after
    ``max_gradings``, or on Ctrl-C)."""
    code, done = 0, 0
    last = stamp(path)
    saved_at = None
    try:
        while True:
            try:
                source = read(path)
            except Exception as e:  # noqa: BLE001 - a half-written or vanished file: wait for the next save
                say(f"judge: {getattr(e, 'message', e)}")
                source = None
            if source is not None:
                code = grade_source(source, saved_at)
                done += 1
            if max_gradings is not None and done >= max_gradings:
                return code
            say(f"[watch] waiting for {path} to be saved again (Ctrl-C to stop)")
            new = wait_for_save(path, last, poll=poll)
            saved_at = time.perf_counter() - SETTLE_SECONDS
            last = new if new is not None else stamp(path)
    except KeyboardInterrupt:
        say("[watch] stopped")
        return code
