"""Which blob store goes with a store (``blob_store``), and a worker's side of a grading's
artifacts: it grades into a scratch folder of its own (``artifacts_scratch``) and keeps its files
only once its verdict is stored (``keep_artifacts``): a stale worker, whose grading was taken
back by another host, keeps nothing."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from judge.pids import alive
from judge.service.blobs import ARTIFACTS, SCRATCH, BlobStore, Kept, artifacts_owner
from judge.service.blobs_local import LocalBlobs

log = logging.getLogger("judge.service.blobs")


def blob_store(data_dir: Path, store) -> BlobStore:
    """The blob store that goes with ``store`` (a ``judge.service.store.Store``): PostgreSQL's
    tables on PostgreSQL, files under ``data_dir`` on SQLite."""
    if store.backend.name == "postgresql":
        from judge.service.blobs_pg import PgBlobs

        return PgBlobs(store)
    return LocalBlobs(data_dir)


_swept: list[int] = []  # the pid whose start swept the scratch folder


def artifacts_scratch(data_dir: Path, sid: str) -> Path:
    """A fresh folder on this host for one grading of ``sid`` by this process (what an
    interrupted attempt left there is removed; on this process's first call, whatever processes
    no longer running left too). Kept files are copied from it (``keep_artifacts``)."""
    base = Path(data_dir) / ARTIFACTS / SCRATCH
    if not _swept or _swept[0] != os.getpid():
        _swept[:] = [os.getpid()]
        for old in (base.iterdir() if base.is_dir() else ()):
            pid = old.name.rpartition("-")[2]
            if not pid.isdigit() or not alive(int(pid)):
                shutil.rmtree(old, ignore_errors=True)
    path = base / f"{sid}-{os.getpid()}"
    shutil.rmtree(path, ignore_errors=True)
    return path



def keep_artifacts(blobs: BlobStore, sid: str, out_dir: Path, verdict, cap: int, *, keep: bool) -> None:
    """After a grading: keep its files as the submission's artifacts when ``keep`` (this
    worker's verdict is the one stored), and make ``verdict.artifacts`` list exactly what was
    kept (what was refused is told in its output). The scratch folder goes either way. A
    failure to keep them is logged and told: the verdict stands without them."""
    try:
        if not keep or not verdict.artifacts:
            return
        try:
            kept = blobs.put_folder(artifacts_owner(sid), out_dir, file_cap=cap)
        except Exception as e:  # noqa: BLE001 - the artifacts are a nicety; the verdict stands
            log.exception("could not keep the artifacts of %s", sid)
            kept = Kept(problems=[f"the artifacts could not be kept: {type(e).__name__}"])
        sizes = dict(kept.files)
        verdict.artifacts = [a for a in verdict.artifacts if sizes.get(a.name) is not None]
        for a in verdict.artifacts:
            a.size = sizes[a.name]
        for problem in kept.problems:
            verdict.output += ("\n" if verdict.output else "") + f"[judge] {problem}"
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
