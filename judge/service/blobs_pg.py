"""The blob store on PostgreSQL (migration 0003): an API node serves what a worker on any host kept.

``blob_sets`` has a row per set (its owner, its file count and bytes, so the caps hold under
concurrent writers: a write locks its set's row), ``blobs`` a row per file (owner, name, size,
the size of its pieces) and ``blob_chunks`` the file's bytes as bytea pieces of ``CHUNK`` bytes
(``(blob, n)``). A set or a file is written in one transaction, so readers see it whole or not at
all; a set's uniqueness and a name's are the tables' keys, so a second writer is refused
(``BlobExists``), never merged. A read fetches one piece per query, on the calling thread's
connection of the store (none is held between pieces): a large file is never whole in the API's
memory, and many readers cost no connections of their own.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import psycopg

from judge.errors import BlobExists, BlobTooLarge
from judge.service.blobs import PREVIEWS, Blob, BlobStore, check_owner, copy_capped
from judge.service.files import CHUNK

log = logging.getLogger("judge.service.blobs_pg")
BUILD_LOCK = 0x626C6F62  # "blob": the advisory locks' first key while a set is built (two-key space)


class PgBlob(Blob):
    """A file in ``blob_chunks``, read a piece per query."""

    def __init__(self, blobs: "PgBlobs", blob_id: int, size: int, chunk: int):
        self.blobs, self.id, self.size, self.chunk = blobs, blob_id, size, chunk
        with blobs.lock:
            blobs.open_reads += 1
        self._open = True

    def read(self, offset: int, n: int) -> bytes:
        index, skip = divmod(offset, self.chunk)
        try:
            row = self.blobs.raw().execute("SELECT substr(data, %s, %s) FROM blob_chunks WHERE blob = %s "
                                           "AND n = %s", (skip + 1, n, self.id, index), binary=True).fetchone()
        except psycopg.Error:  # the database went away mid-download: the reader ends short
            log.warning("reading blob %d failed at %d", self.id, offset, exc_info=True)
            return b""
        return bytes(row[0]) if row else b""  # gone (an old preview pruned): the reader ends short

    def close(self) -> None:
        if self._open:
            self._open = False
            with self.blobs.lock:
                self.blobs.open_reads -= 1


class PgBlobs(BlobStore):
    name = "postgresql"

    def __init__(self, store):
        self.store = store  # its thread-local connections carry the blobs' queries too
        self.open_reads = 0  # blobs opened and not yet closed (the tests' count of leaks)
        self.lock = threading.Lock()  # guards open_reads (blobs are read from many threads)

    def raw(self):
        """This thread's psycopg connection (autocommit; ``transaction()`` for a write)."""
        return self.store.db.raw

    # --- writing ----------------------------------------------------------------------------
    def _new_file(self, raw, owner: str, name: str) -> int:
        row = raw.execute("INSERT INTO blobs (owner, name, size, chunk) VALUES (%s, %s, 0, %s) "
                          "ON CONFLICT (owner, name) DO NOTHING RETURNING id", (owner, name, CHUNK)).fetchone()
        if row is None:
            raise BlobExists(f"{name} is kept already")
        return row[0]

    def _put(self, owner: str, name: str, data: bytes) -> None:
        raw = self.raw()
        with raw.transaction():
            raw.execute("INSERT INTO blob_sets (owner, files, bytes, created_at) VALUES (%s, 0, 0, %s) "
                        "ON CONFLICT (owner) DO NOTHING", (owner, time.time()))
            files, total = raw.execute("UPDATE blob_sets SET files = files + 1, bytes = bytes + %s "
                                       "WHERE owner = %s RETURNING files, bytes", (len(data), owner)).fetchone()
            if files > self.set_files or total > self.set_bytes:  # the transaction rolls back
                raise BlobTooLarge(f"{name} was not kept: its set is capped at {self.set_files} files and "
                                   f"{self.set_bytes} bytes")
            blob_id = self._new_file(raw, owner, name)
            with _Chunks(raw, blob_id) as chunks:
                for i in range(0, len(data), CHUNK):
                    chunks.write(data[i:i + CHUNK])

    def _put_folder(self, owner: str, folder: Path, names: list[str], cap: int) -> list[tuple[str, int]]:
        raw = self.raw()
        kept = []
        with raw.transaction():
            made = raw.execute("INSERT INTO blob_sets (owner, files, bytes, created_at) VALUES (%s, 0, 0, %s) "
                               "ON CONFLICT (owner) DO NOTHING", (owner, time.time())).rowcount
            if made != 1:  # a concurrent maker waits here for the first one's commit, then is refused
                raise BlobExists(f"{owner} is kept already")
            for name in names:
                try:
                    with raw.transaction():  # a savepoint: a file that changed meanwhile is left out alone
                        blob_id = self._new_file(raw, owner, name)
                        with _Chunks(raw, blob_id) as chunks:
                            if copy_capped(folder, name, cap, chunks.write) is None:
                                raise _Changed()
                except _Changed:
                    continue
                kept.append((name, chunks.size))
            raw.execute("UPDATE blob_sets SET files = %s, bytes = %s WHERE owner = %s",
                        (len(kept), sum(s for _, s in kept), owner))
        return kept

    # --- reading ----------------------------------------------------------------------------
    def _open(self, owner: str, name: str, cap: int) -> Blob | None:
        row = self.raw().execute("SELECT id, size, chunk FROM blobs WHERE owner = %s AND name = %s",
                                 (owner, name)).fetchone()
        if row is None or row[1] > cap:
            return None
        return PgBlob(self, row[0], row[1], row[2])

    def list(self, owner: str) -> list[tuple[str, int]] | None:
        check_owner(owner)
        raw = self.raw()
        if raw.execute("SELECT 1 FROM blob_sets WHERE owner = %s", (owner,)).fetchone() is None:
            return None
        return [(r[0], r[1]) for r in raw.execute("SELECT name, size FROM blobs WHERE owner = %s ORDER BY name",
                                                   (owner,)).fetchall()]

    def exists(self, owner: str) -> bool:
        check_owner(owner)
        return self.raw().execute("SELECT 1 FROM blob_sets WHERE owner = %s", (owner,)).fetchone() is not None

    @contextmanager
    def building(self, owner: str) -> Iterator[None]:
        """A session advisory lock on the set's name, held on this thread's connection (a host
        that dies while building lets the next one in with its connection)."""
        key = zlib.crc32(check_owner(owner).encode()) - (1 << 31)  # a signed int4
        raw = self.raw()
        raw.execute("SELECT pg_advisory_lock(%s, %s)", (BUILD_LOCK, key))
        try:
            yield
        finally:
            raw.execute("SELECT pg_advisory_unlock(%s, %s)", (BUILD_LOCK, key))

    def prune(self, owner: str) -> int:
        check_owner(owner)
        if not owner.startswith(PREVIEWS + "/"):
            return 0
        prefix = owner.rsplit("/", 1)[0] + "/"
        return self.raw().execute("DELETE FROM blob_sets WHERE substr(owner, 1, %s) = %s AND owner != %s",
                                  (len(prefix), prefix, owner)).rowcount


class _Changed(Exception):
    """A file changed while it was copied: its savepoint rolls back, the set goes on."""


class _Chunks:
    """Writes one file's pieces as they come, a ``CHUNK`` at most held, then its size."""

    def __init__(self, raw, blob_id: int):
        self.raw, self.id = raw, blob_id
        self.buf, self.n, self.size = bytearray(), 0, 0

    def __enter__(self) -> "_Chunks":
        self.cur = self.raw.cursor()
        return self

    def _insert(self, data: bytes) -> None:
        self.cur.execute("INSERT INTO blob_chunks (blob, n, data) VALUES (%s, %s, %s)", (self.id, self.n, data))
        self.n += 1

    def write(self, data: bytes) -> None:
        self.buf += data
        self.size += len(data)
        while len(self.buf) >= CHUNK:
            self._insert(bytes(self.buf[:CHUNK]))
            del self.buf[:CHUNK]

    def __exit__(self, kind, *_) -> None:
        try:
            if kind is None:
                if self.buf:
                    self._insert(bytes(self.buf))
                self.cur.execute("UPDATE blobs SET size = %s WHERE id = %s", (self.size, self.id))
        finally:
            self.cur.close()
