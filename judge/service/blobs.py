"""Where the files the API serves live: a grading's artifacts (metrics.json, the views' specs, the
views drawn from them) and an exercise's previews (its reference's T3 artifacts, per version).

One interface, ``BlobStore``, over *sets* of named files: a set is a submission's artifacts
(``artifacts_owner(sid)``) or one version of an exercise's previews (``previews_owner``). Two
backends, picked by the store's URL (``judge.service.artifacts.blob_store``):

- ``judge.service.blobs_local.LocalBlobs`` (SQLite, the embedded default): files under the data dir, as before
  (``artifacts/<sid>/``, ``previews/<slug>/<digest>/``), read through no link;
- ``judge.service.blobs_pg.PgBlobs`` (PostgreSQL): bytea chunks in the database (migration
  0003), so an API node serves what a worker on any other host produced.

Either way a set is written once, whole (``put_folder``: atomically, so a reader never sees half
of one), and a file once (``put``: a drawn view added to its set); nothing is overwritten, so a
stream never changes under its reader. Names and sizes are checked on write and on read, never
trusted: a name is ``files.FILE_NAME``, a file at most its cap (a grading's files: the exercise's
``artifact_bytes``; any file read: ``files.FILE_CAP``), a set at most ``SET_FILES`` files and
``SET_BYTES`` bytes. Reads are ``Blob``s, read a piece at a time (``files.BlobStream`` streams
them), so a large file is never held whole in the API's memory.

A worker grades into a scratch folder of its own (``judge.service.artifacts``) and keeps its files
only once its verdict is stored: a stale worker, whose grading was taken back by
another host, keeps nothing.
"""

from __future__ import annotations

import logging
import os
import re
from abc import ABC, abstractmethod
from pathlib import Path

from pydantic import BaseModel, Field

from judge.errors import BlobTooLarge
from judge.service.files import CHUNK, FILE_CAP, FILE_NAME, list_regular_files, open_regular_file

log = logging.getLogger("judge.service.blobs")

SET_FILES = 64  # the most files one set holds (a grading's artifacts and the views drawn of them)
SET_BYTES = 64 << 20  # the most bytes one set holds
ARTIFACTS, PREVIEWS, SCRATCH = "artifacts", "previews", ".scratch"
OWNER = re.compile(r"^(artifacts/[0-9a-f]{24}|previews/[A-Za-z0-9_-]{1,100}/[0-9a-f]{1,64})$")


def artifacts_owner(sid: str) -> str:
    """The set of a submission's artifacts."""
    return f"{ARTIFACTS}/{sid}"


def previews_owner(slug: str, digest: str) -> str:
    """The set of one version of an exercise's previews (``digest``: ``catalog.preview_digest``)."""
    return f"{PREVIEWS}/{slug}/{digest}"


def check_owner(owner: str) -> str:
    if not OWNER.match(owner):
        raise ValueError(f"not a blob set: {owner!r}")  # a judge bug: owners are made above
    return owner


class Kept(BaseModel):
    """What ``put_folder`` kept of a folder, and what it refused."""

    files: list[tuple[str, int]] = Field(default_factory=list)  # (name, size) of each file kept, by name
    problems: list[str] = Field(default_factory=list)  # each file refused, and why (for the learner)


class Blob(ABC):
    """An open file of a set: its size, and its bytes read a piece at a time (blocking: the API
    reads in a worker thread). ``close`` frees what it holds; reading after it is a bug."""

    size: int

    @abstractmethod
    def read(self, offset: int, n: int) -> bytes:
        """Up to ``n`` bytes from ``offset`` (fewer: a piece ends there; empty: nothing more)."""

    def close(self) -> None:
        pass

    def read_all(self) -> bytes:
        out, offset = [], 0
        try:
            while offset < self.size:
                data = self.read(offset, min(CHUNK, self.size - offset))
                if not data:
                    break
                out.append(data)
                offset += len(data)
        finally:
            self.close()
        return b"".join(out)


class MemoryBlob(Blob):
    """Bytes already in memory (a drawing that its set had no room to keep)."""

    def __init__(self, data: bytes):
        self.data, self.size = data, len(data)

    def read(self, offset: int, n: int) -> bytes:
        return self.data[offset:offset + n]


class BlobStore(ABC):
    """The interface; the checks every backend shares are here, what differs below."""

    name = ""  # "files" or "postgresql"
    set_files = SET_FILES  # the most files one set holds (an instance's own: the tests lower it)
    set_bytes = SET_BYTES  # the most bytes one set holds

    # --- writing ----------------------------------------------------------------------------
    def put(self, owner: str, name: str, data: bytes, *, cap: int = FILE_CAP) -> None:
        """Keep one file in ``owner``'s set (made if absent). ``BlobExists`` when the set has a
        file of that name already; ``BlobTooLarge`` over ``cap`` or the set's caps."""
        check_owner(owner)
        if not FILE_NAME.match(name):
            raise ValueError(f"not a file name: {name[:120]!r}")
        if len(data) > min(cap, FILE_CAP):
            raise BlobTooLarge(f"{name} is {len(data)} bytes; at most {min(cap, FILE_CAP)} are kept")
        self._put(owner, name, data)

    def put_folder(self, owner: str, folder: Path, *, file_cap: int) -> Kept:
        """Keep the regular files of ``folder`` as ``owner``'s set, whole or not at all (a
        reader sees all of it or none). Files with bad names, links, files over ``file_cap``
        and files past the set's caps (in name order) are left out and said so. ``BlobExists``
        when the set exists already (nothing is written)."""
        check_owner(owner)
        cap = min(file_cap, FILE_CAP)
        planned, problems, count, total = [], [], 0, 0
        names = set()
        try:
            names = {e.name for e in os.scandir(folder) if not e.name.startswith(".")}
        except OSError:
            pass
        listed = dict(list_regular_files(folder))
        for name in sorted(names):
            size = listed.get(name)
            if size is None:
                problems.append(f"{name[:120]!r} was not kept: not a plain file with a valid name")
            elif size > cap:
                problems.append(f"{name} was not kept: {size} bytes, over the {cap} bytes of one artifact")
            elif count + 1 > self.set_files or total + size > self.set_bytes:
                problems.append(f"{name} was not kept: the grading's files are capped at {self.set_files} "
                                f"files and {self.set_bytes} bytes")
            else:
                planned.append(name)
                count, total = count + 1, total + size
        kept = self._put_folder(owner, folder, planned, cap)
        for name in sorted(set(planned) - {n for n, _ in kept}):
            problems.append(f"{name} was not kept: it changed while it was being stored")
        return Kept(files=kept, problems=problems)

    # --- reading ----------------------------------------------------------------------------
    def open(self, owner: str, name: str, cap: int = FILE_CAP) -> Blob | None:
        """``name`` of ``owner``'s set if it is there, at most ``cap`` bytes; else None."""
        check_owner(owner)
        if not FILE_NAME.match(name):
            return None
        return self._open(owner, name, min(cap, FILE_CAP))

    def read(self, owner: str, name: str, cap: int = FILE_CAP) -> bytes | None:
        """A small file whole (a view's spec), or None."""
        blob = self.open(owner, name, cap)
        return None if blob is None else blob.read_all()

    @abstractmethod
    def list(self, owner: str) -> list[tuple[str, int]] | None:
        """(name, size) of the set's files, by name; None when there is no such set."""

    def exists(self, owner: str) -> bool:
        return self.list(owner) is not None

    @abstractmethod
    def building(self, owner: str):
        """A context in which one builder (on any host) makes ``owner``'s set: the others wait,
        then find it made."""

    @abstractmethod
    def prune(self, owner: str) -> int:
        """Remove the other versions of the previews ``owner`` is one version of; how many."""

    # --- the backends -----------------------------------------------------------------------
    @abstractmethod
    def _put(self, owner: str, name: str, data: bytes) -> None: ...

    @abstractmethod
    def _put_folder(self, owner: str, folder: Path, names: list[str], cap: int) -> list[tuple[str, int]]: ...

    @abstractmethod
    def _open(self, owner: str, name: str, cap: int) -> Blob | None: ...


def copy_capped(folder: Path, name: str, cap: int, write) -> int | None:
    """Read ``folder/name`` (no link followed) a ``CHUNK`` at a time into ``write``; its size, or
    None when it is gone or grew past ``cap`` meanwhile."""
    opened = open_regular_file(folder, name, cap)
    if opened is None:
        return None
    fd, _ = opened
    size = 0
    try:
        while data := os.read(fd, CHUNK):
            size += len(data)
            if size > cap:
                return None
            write(data)
    finally:
        os.close(fd)
    return size
