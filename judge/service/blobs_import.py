"""Copy artifacts kept as files into a store's blob store: ``python -m judge.service.blobs_import
DATABASE_URL DATA_DIR [DATA_DIR ...]``.

For moving to PostgreSQL blobs: a deployment whose grading hosts kept artifacts under their own
``JUDGE_DATA_DIR/artifacts/<id>/`` (the judge before migration 0003), or a SQLite deployment
moved to PostgreSQL. Each submission's folder becomes its set, with the same checks as a
worker's (names, no links, sizes); a set already kept is left as it is (run it again at will).
Previews need no copy: the first worker host to start builds any that are missing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pydantic import BaseModel, Field

from judge.errors import BlobExists
from judge.service.blobs import ARTIFACTS, BlobStore, artifacts_owner
from judge.service.files import FILE_CAP
from judge.service.guard import SUBMISSION_ID


class Imported(BaseModel):
    """What one import did."""

    copied: int = 0  # submissions whose artifacts were copied
    present: int = 0  # submissions whose artifacts were kept already (left as they are)
    problems: list[str] = Field(default_factory=list)  # files left out, and why, by submission


def import_artifacts(blobs: BlobStore, data_dir: Path) -> Imported:
    """Copy every ``data_dir/artifacts/<id>/`` into ``blobs``."""
    out = Imported()
    root = Path(data_dir) / ARTIFACTS
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return out
    for e in entries:
        if not SUBMISSION_ID.match(e.name) or not e.is_dir(follow_symlinks=False):
            continue
        try:
            kept = blobs.put_folder(artifacts_owner(e.name), Path(e.path), file_cap=FILE_CAP)
        except BlobExists:
            out.present += 1
            continue
        out.copied += 1
        out.problems += [f"{e.name}: {p}" for p in kept.problems]
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    from judge.service.artifacts import blob_store
    from judge.service.store import Store, is_postgres

    if not is_postgres(argv[0]):
        print("the database must be postgresql://…: on SQLite the artifacts are read from the data dir "
              "where they are", file=sys.stderr)
        return 2
    store = Store(argv[0])
    try:
        blobs = blob_store(Path(argv[1]), store)
        for data_dir in argv[1:]:
            done = import_artifacts(blobs, Path(data_dir))
            print(f"{data_dir}: {done.copied} copied, {done.present} kept already")
            for p in done.problems:
                print(f"  {p}")
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
