"""The blob store of the embedded default (SQLite, one host): sets as folders under the data dir
(``artifacts/<sid>/``, ``previews/<slug>/<digest>/``), read through no link. The interface and
its rules are in ``judge.service.blobs``."""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from judge.errors import BlobExists, BlobTooLarge
from judge.service.blobs import PREVIEWS, Blob, BlobStore, check_owner, copy_capped
from judge.service.files import list_regular_files, open_regular_file


class FileBlob(Blob):
    def __init__(self, fd: int, size: int):
        self.fd, self.size = fd, size

    def read(self, offset: int, n: int) -> bytes:
        return os.pread(self.fd, n, offset)

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


class LocalBlobs(BlobStore):
    """Sets as folders under ``root`` (the data dir). A set is made by renaming a complete
    temporary folder into place, under a lock beside it (one host: the data dir is local), so
    it appears whole; hidden names (``.``) are temporaries and locks, never served."""

    name = "files"

    def __init__(self, root: Path):
        self.root = Path(root)

    def folder(self, owner: str) -> Path:
        return self.root / check_owner(owner)

    def _lock(self, owner: str):
        return _flock(self.folder(owner).parent / ".lock")

    def _put(self, owner: str, name: str, data: bytes) -> None:
        final = self.folder(owner)
        with self._lock(owner):
            final.mkdir(parents=True, exist_ok=True)
            files = list_regular_files(final)
            if any(n == name for n, _ in files) or os.path.lexists(final / name):
                raise BlobExists(f"{name} is kept already")
            if len(files) + 1 > self.set_files or sum(s for _, s in files) + len(data) > self.set_bytes:
                raise BlobTooLarge(f"{name} was not kept: its set is capped at {self.set_files} files and "
                                   f"{self.set_bytes} bytes")
            tmp = final / f".{name}.{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, final / name)

    def _put_folder(self, owner: str, folder: Path, names: list[str], cap: int) -> list[tuple[str, int]]:
        final = self.folder(owner)
        final.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(final):
            raise BlobExists(f"{owner} is kept already")
        tmp = final.parent / f".{final.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        tmp.mkdir()
        kept = []
        try:
            for name in names:
                fd = os.open(tmp / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
                with os.fdopen(fd, "wb") as out:
                    size = copy_capped(folder, name, cap, out.write)
                if size is None:
                    os.unlink(tmp / name)
                else:
                    kept.append((name, size))
            with self._lock(owner):
                if os.path.lexists(final):
                    raise BlobExists(f"{owner} is kept already")
                os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return kept

    def _open(self, owner: str, name: str, cap: int) -> Blob | None:
        opened = open_regular_file(self.folder(owner), name, cap)
        return None if opened is None else FileBlob(*opened)

    def list(self, owner: str) -> list[tuple[str, int]] | None:
        final = self.folder(owner)
        if final.is_symlink() or not final.is_dir():
            return None
        return list_regular_files(final)

    @contextmanager
    def building(self, owner: str) -> Iterator[None]:
        with _flock(self.folder(owner).parent / ".build"):
            yield

    def prune(self, owner: str) -> int:
        final = self.folder(owner)
        if not owner.startswith(PREVIEWS + "/"):
            return 0
        removed = 0
        with self._lock(owner):
            for old in final.parent.iterdir():
                if old.name != final.name and not old.name.startswith(".") and old.is_dir() \
                        and not old.is_symlink():
                    shutil.rmtree(old, ignore_errors=True)
                    removed += 1
        return removed
