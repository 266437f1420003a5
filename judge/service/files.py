"""Files the API serves (a submission's artifacts, an exercise's previews): opened safely, never
through a link (``open_regular_file``, which ``judge.service.blobs_local.LocalBlobs`` reads through),
and streamed a chunk at a time off the event loop (``BlobStream``: from disk or from PostgreSQL),
under a cap on the transfers in flight (``Transfers``), so neither a large file nor many readers
of one hold its bytes in the API's memory.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from pathlib import Path

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}(\.[A-Za-z0-9]{1,10}){0,2}$")
FILE_CAP = 32 << 20  # the largest file served
CHUNK = 256 << 10  # bytes read from disk and sent at a time
STALL_S = 30.0  # a reader that takes no chunk for this long loses its transfer
FILE_HEADERS = {"X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "default-src 'none'; sandbox"}  # no script in an SVG


def open_regular_file(folder: Path, name: str, cap: int = FILE_CAP) -> tuple[int, int] | None:
    """``(fd, size)`` of ``folder/name`` if it is a regular file of at most ``cap`` bytes reached
    through no link (the folder included), else None. The caller closes ``fd``."""
    if not FILE_NAME.match(name):
        return None
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return None
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
        os.close(fd)
        return None
    return fd, st.st_size


def list_regular_files(folder: Path) -> list[tuple[str, int]]:
    """(name, size) of the regular files in ``folder`` with acceptable names, sorted."""
    out = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return []
    for e in entries:
        if FILE_NAME.match(e.name) and e.is_file(follow_symlinks=False):
            out.append((e.name, e.stat(follow_symlinks=False).st_size))
    return out


class Transfers:
    """How many file transfers are in flight: at most ``total`` at once, ``per_client`` of one
    client's. ``take`` answers at once (no queueing): a refused transfer is the caller's to
    report."""

    def __init__(self, total: int, per_client: int):
        self.total, self.per_client = total, per_client
        self.active: dict[str, int] = {}  # client → its transfers in flight
        self._lock = threading.Lock()

    def take(self, client: str) -> str | None:
        """None when a slot was taken (give it back with ``release``), else which cap refused it:
        "client" or "total"."""
        with self._lock:
            mine = self.active.get(client, 0)
            if mine >= self.per_client:
                return "client"
            if sum(self.active.values()) >= self.total:
                return "total"
            self.active[client] = mine + 1
            return None

    def release(self, client: str) -> None:
        with self._lock:
            left = self.active.get(client, 0) - 1
            if left > 0:
                self.active[client] = left
            else:
                self.active.pop(client, None)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return sum(self.active.values())


class BlobStream(Response):
    """A response that sends an open blob (``judge.service.blobs.Blob``: a file on disk or a
    file's pieces in PostgreSQL) a ``CHUNK`` at a time, each read in a worker thread, and always
    closes the blob and calls ``done`` (a transfer's slot), also when the reader goes away or
    stalls for ``STALL_S``. It owns ``blob`` from construction on."""

    def __init__(self, blob, media_type: str, name: str, done=None):
        self.blob, self.size, self.done = blob, blob.size, done
        self.status_code, self.background = 200, None
        self.raw_headers = [(b"content-type", media_type.encode("latin-1")),
                        (b"content-length", str(self.size).encode()),
                        (b"content-disposition", f'inline; filename="{name}"'.encode("latin-1"))]
        self.raw_headers += [(k.lower().encode(), v.encode()) for k, v in FILE_HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as tg:
                async def gone() -> None:  # the reader hung up: stop reading the file for it
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(gone)
                await self._send(send)
                tg.cancel_scope.cancel()
        except* (OSError, TimeoutError):  # the reader went away or stalled: nothing left to tell it
            pass
        finally:
            self.close()  # cheap for every blob (a descriptor, a counter): no thread needed

    async def _send(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        sent = 0
        while sent < self.size:
            data = await run_in_threadpool(self.blob.read, sent, min(CHUNK, self.size - sent))
            if not data:  # the file shrank or went under us: end short (Content-Length tells the reader)
                break
            sent += len(data)
            with anyio.fail_after(STALL_S):
                await send({"type": "http.response.body", "body": data, "more_body": sent < self.size})
        if sent < self.size:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    def __del__(self) -> None:  # never sent (the request failed after it was made): still free both
        self.close()

    def close(self) -> None:
        blob, self.blob = self.blob, None
        if blob is not None:
            blob.close()
            if self.done is not None:
                self.done()
