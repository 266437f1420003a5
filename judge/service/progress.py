"""How a worker's changes reach the API process: test results written to the ``events`` table a
few at a time (``ProgressWriter``), and a nudge through a pipe after each commit
(``notify_change``), which the API's ``Changes`` reads to wake that submission's waiters at once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from judge.service.store import Store
from judge.tuning import FLUSH_DELAY  # the longest a test's result waits before it is written

log = logging.getLogger("judge.service.progress")


def notify_change(fd: int | None, sid: str, kind: str = "s") -> None:
    """Tell the API process that ``sid`` changed; call it after the commit. ``kind``: ``s`` its
    result or state changed (a verdict, its artifacts, an error, a retry): everyone waiting for it
    looks again; ``e`` it only has new events (test results, "running"): event streams look.
    Never blocks (the pipe is non-blocking): a notification that does not fit is left to the
    API's polling (``judge.service.guard.Changes``)."""
    if fd is None:
        return
    try:
        os.write(fd, f"{kind}{sid}\n".encode("ascii"))  # under PIPE_BUF: written whole or not at all
    except OSError:  # full (EAGAIN), or the API process is gone
        pass


class ProgressWriter:
    """Test results on their way to the ``events`` table: written in order, in batches, at most
    ``delay`` seconds after they happen (by a background thread), and all of them by ``flush()``,
    or ``taken()``, which the worker calls before it stores the verdict. ``changed(sid, "e")``
    follows each write of its own."""

    def __init__(self, store: Store, changed: Callable[[str, str], None], delay: float = FLUSH_DELAY):
        self.store, self.changed, self.delay = store, changed, delay
        self._cond = threading.Condition()
        self._write = threading.Lock()  # batches are written one at a time, in order
        self._pending: list[tuple[str, float, dict]] = []  # (submission, at, data)
        self._due: float | None = None  # when the oldest pending result must be written
        self._thread: threading.Thread | None = None

    def add(self, sid: str, data: dict) -> None:
        with self._cond:
            self._pending.append((sid, time.time(), data))
            if self._due is None:
                self._due = time.monotonic() + self.delay
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
                    self._thread.start()
                self._cond.notify()

    @contextmanager
    def taken(self) -> Iterator[list[tuple[str, float, dict]]]:
        """Every pending result, for the caller to write in its own transaction (the verdict's)
        before the block ends; meanwhile the background thread writes nothing."""
        with self._write:
            yield self._take()

    def flush(self, notify: bool = True) -> None:
        """Write every pending result now (``notify=False``: a state change follows at once and
        notifies for both)."""
        with self._write:
            batch = self._take()
            if not batch:
                return
            try:
                self.store.progress_batch(batch)
            except Exception:  # noqa: BLE001 - progress is advisory; the verdict is what counts
                log.exception("could not write %d progress event(s)", len(batch))
                return
            if notify:
                for sid in dict.fromkeys(s for s, _, _ in batch):
                    self.changed(sid, "e")

    def _take(self) -> list[tuple[str, float, dict]]:
        with self._cond:
            batch, self._pending, self._due = self._pending, [], None
        return batch

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._due is None or self._due > time.monotonic():
                    self._cond.wait(None if self._due is None else self._due - time.monotonic())
            self.flush()
