"""A submission's event stream and artifact wait are woken by the workers' notification alone.

The API's fallback poll (``Changes``' look at the events table) is set an hour apart and the
stream's keep-alive an hour too, so nothing but the notification can move a stream on: a
notification that is lost shows as a stream that never ends (caught by a generous deadline, a
hang detector, not a timing assertion). The notification is made to arrive at the worst moment:
while the stream is suspended sending what it just read (as under back-pressure from a slow
client), i.e. after it read the state and before it waits again. On SQLite it comes through a
pipe, as from the pool's workers; on PostgreSQL from the database (LISTEN/NOTIFY,
``RemoteChanges``), as on an API-only node (``judge serve --workers 0`` beside ``judge worker``).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading

import pytest

from judge.models import Artifact, Verdict
from judge.service import app as app_module
from judge.service.config import Config
from judge.service.guard import Changes, client_id
from judge.service.progress import notify_change
from judge.service.remote_changes import RemoteChanges
from judge.service.routers import submissions
from judge.service.store import Store

KEY = "events-key"
HANG = 60.0  # seconds: far beyond any wake-up by notification; a lost one waits an hour


class Node:
    """An API process's app on ``database_url`` with no workers of its own, its ``Changes``
    polling an hour apart and fed by a pipe (SQLite: the test writes the workers' lines into it)
    or by the database's notifications (PostgreSQL: ``RemoteChanges``)."""

    def __init__(self, tmp_path, database_url: str, monkeypatch):
        self.store = Store(database_url)
        self.remote = RemoteChanges(self.store) if self.store.backend.name == "postgresql" else None
        self.r, self.w = os.pipe() if self.remote is None else (self.remote.fd, None)
        made: list[Changes] = []

        def changes(store, interval, fd):  # create_app's, with the poll an hour apart
            made.append(Changes(store, 3600.0, self.r))
            return made[-1]

        monkeypatch.setattr(app_module, "Changes", changes)
        monkeypatch.setattr(submissions, "SSE_KEEPALIVE", 3600.0)
        cfg = Config(database_url=database_url, api_keys=(KEY,), workers=0, data_dir=tmp_path / "data",
                     exercises=("glm5_mis",))
        self.app = app_module.create_app(cfg)
        self.changes = made[0]

    def committed(self, sid: str, kind: str = "s") -> None:
        """A worker's commit has happened: its notification (on PostgreSQL the commit itself
        NOTIFYs; the worker's pipe line is for one host only)."""
        if self.w is not None:
            notify_change(self.w, sid, kind)

    def close(self) -> None:
        if self.remote is not None:
            self.remote.stop()
        else:
            os.close(self.r)
            os.close(self.w)


@pytest.fixture
def node(tmp_path, database_url, monkeypatch):
    n = Node(tmp_path, database_url, monkeypatch)
    yield n
    n.close()


def scope(path: str) -> dict:
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
            "headers": [(b"authorization", f"Bearer {KEY}".encode()), (b"accept", b"*/*"),
                        (b"host", b"127.0.0.1")]}


async def request(node: Node, path: str, on_body) -> tuple[int, bytes]:
    """Call the app as the server would; ``on_body(chunk)`` runs (awaited) inside each send of
    the body, with the request handler suspended there."""
    status, body = [0], bytearray()
    received = asyncio.Event()

    async def receive():
        if not received.is_set():
            received.set()
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client never goes away

    async def send(msg):
        if msg["type"] == "http.response.start":
            status[0] = msg["status"]
        elif msg.get("body"):
            body.extend(msg["body"])
            await on_body(bytes(msg["body"]))

    await asyncio.wait_for(node.app(scope(path), receive, send), HANG)
    return status[0], bytes(body)


async def listening(node: Node) -> None:
    node.changes.start()
    if node.remote is not None:
        node.remote.start()
        await asyncio.sleep(0.5)  # LISTEN is in place before anything is committed


def events_of(body: bytes) -> list[tuple[str, dict]]:
    out = []
    for block in body.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        if "event" in lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_the_verdict_notified_while_the_stream_sends_ends_the_stream(node, run_async):
    """The worker stores the verdict and notifies while the stream is still sending the test
    results it read just before: the stream sends the verdict (its ``end``) next, at once."""
    store = node.store
    sid = store.add(client_id(KEY), "glm5_mis", "run", "x = 1\n", queue_max=10)
    store.claim("w1")
    store.progress(sid, {"tier": "T0", "name": "test_a", "status": "passed"})
    stored = []

    async def on_body(chunk: bytes) -> None:
        if b"event: test" in chunk and not stored:  # the stream read "running" and one test
            verdict = Verdict(exercise="glm5_mis", verdict="accepted", mode="run", seed=1)
            await asyncio.to_thread(store.finish, sid, verdict.model_dump_json(), "accepted",
                                    [(sid, 0.0, {"tier": "T0", "name": "test_b", "status": "passed"})],
                                    worker="w1")
            node.committed(sid)
            stored.append(sid)
            await asyncio.sleep(0.3)  # the client is slow to read: the notification comes now

    async def main():
        await listening(node)
        try:
            return await request(node, f"/submissions/{sid}/events", on_body)
        finally:
            node.changes.stop()

    status, body = run_async(main())
    assert status == 200 and stored == [sid]
    assert b": keep-alive" not in body
    events = events_of(body)
    assert [k for k, _ in events] == ["status", "status", "test", "test", "status", "end"]
    assert [d.get("name") for k, d in events if k == "test"] == ["test_a", "test_b"]
    assert events[-1][1]["status"] == "done" and events[-1][1]["id"] == sid


def test_plots_notified_while_the_artifact_request_reads_end_its_wait(node, monkeypatch, run_async):
    """An artifact request for plots still being drawn waits for them (here up to an hour); the
    worker stores them, and notifies, while the request is reading the verdict: the request
    looks again at once and answers (404: the plots came without the file it asked for)."""
    monkeypatch.setattr(submissions, "ARTIFACT_WAIT", 3600.0)
    store = node.store
    sid = store.add(client_id(KEY), "glm5_mis", "run", "x = 1\n", queue_max=10)
    store.claim("w1")
    early = Verdict(exercise="glm5_mis", verdict="accepted", mode="run", seed=1, artifacts_pending=True)
    store.finish(sid, early.model_dump_json(), "accepted", worker="w1")
    served = node.app.state.store  # the app's own Store: its first read of the verdict is slowed
    real_get = served.get
    reads = []

    def get(*args, **kwargs):  # the request's read, in its worker thread
        row = real_get(*args, **kwargs)
        reads.append(row["verdict"] is not None and '"artifacts_pending":true' in row["verdict"])
        if len(reads) == 1:  # the plots are stored while the first read is in flight
            late = early.model_copy(update={"artifacts_pending": False})
            store.add_artifacts(sid, late.model_dump_json(), worker="w1")
            node.committed(sid)
            threading.Event().wait(0.3)  # the notification arrives before this read ends
        return row

    async def main():
        await listening(node)
        try:
            return await request(node, f"/submissions/{sid}/artifacts/metrics.json", _nothing)
        finally:
            node.changes.stop()

    monkeypatch.setattr(served, "get", get)
    status, body = run_async(main())
    assert reads[0] is True and reads[-1] is False  # it waited, then read the plots' verdict
    assert status == 404 and b"has no artifact" in body


async def _nothing(chunk: bytes) -> None:
    return None
