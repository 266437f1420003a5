"""Changes committed on other hosts, for an API node on PostgreSQL with no workers of its own.

The store NOTIFYs each change with its submission's id (``Store.listen_changes``); a thread here
turns each into a line on a pipe, in the form the pool's workers write (``notify_change``), so
``judge.service.guard.Changes`` wakes the waiters and SSE streams for it exactly as on one host.
The notification carries no data: the streams read the events table from their last id
(``Last-Event-ID`` replays from there too), so a lost notification delays, never loses, anything,
and ``Changes``' poll of the events table stays the fallback.
"""

from __future__ import annotations

import os
import threading

from judge.service.progress import notify_change
from judge.service.store import Store


class RemoteChanges:
    def __init__(self, store: Store):
        self.store = store
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)  # a full pipe drops the line: the poll catches up
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.store.listen_changes, name="remote-changes",
                                        args=(lambda kind, sid: notify_change(self._w, sid, kind), self._stop),
                                        daemon=True)

    @property
    def fd(self) -> int:
        """The read end, for ``Changes``."""
        return self._r

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(3)
        os.close(self._w)
        os.close(self._r)
