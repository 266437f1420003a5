"""The exercises a service serves, and their static previews (the reference's T3 artifacts): one
set per exercise version in the blob store (``judge.service.blobs``), built by whichever host
gets there first (``build_previews``) and served by every API node.

Unlike ``judge.exercise.discover`` (which fails on the first broken folder, as an author's check
should), a service skips a broken folder with a warning and serves the others.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path

from judge.service.blobs import PREVIEWS, SCRATCH, BlobStore, previews_owner
from judge.service.config import Config
from judge.errors import BlobExists, JudgeError
from judge.exercise import Exercise, exercise_folders, load_exercise

log = logging.getLogger("judge.service.catalog")


def load_catalog(cfg: Config) -> dict[str, Exercise]:
    out: dict[str, Exercise] = {}
    wanted = set(cfg.exercises)
    for folder in exercise_folders(Path(cfg.exercises_dir)):
        if wanted and folder.name not in wanted:
            continue
        try:
            ex = load_exercise(folder)
        except JudgeError as e:
            log.warning("skipping exercise %s: %s", folder.name, e.message)
            continue
        out[ex.slug] = ex
    missing = wanted - set(out)
    if missing:
        log.warning("JUDGE_EXERCISES names exercises that are not served: %s", ", ".join(sorted(missing)))
    return out


def preview_digest(ex: Exercise) -> str:
    """Changes whenever what the previews are made from changes."""
    h = hashlib.sha256()
    files = [ex.root / "exercise.toml", ex.experiment_path, ex.solution_path] + ex.test_files()["T3"]
    for p in files:
        h.update(p.name.encode() + b"\0")
        try:
            h.update(p.read_bytes())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()[:16]


def previews_of(ex: Exercise) -> str:
    """The blob set of this version of ``ex``'s previews."""
    return previews_owner(ex.slug, preview_digest(ex))


def preview_dir(cfg: Config, ex: Exercise) -> Path:
    """Where the files backend (SQLite's) keeps this version of ``ex``'s previews."""
    return Path(cfg.data_dir) / previews_of(ex)


def build_previews(cfg: Config, blobs: BlobStore, ex: Exercise) -> bool:
    """The reference's T3 artifacts for this version of ``ex``, graded in-process (the reference
    is trusted) into a scratch folder of this host and kept as one set, unless some host has
    kept them already (while one host builds, the others wait for it: ``BlobStore.building``).
    Older versions' sets go. True when this call built them."""
    from judge.grading import grade

    owner = previews_of(ex)
    if blobs.exists(owner):
        return False
    with blobs.building(owner):
        if blobs.exists(owner):
            return False
        tmp = Path(cfg.data_dir) / PREVIEWS / SCRATCH / f"{ex.slug}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            v = grade(ex, ex.solution_path.read_text(), sandbox=None, mode="run", tiers=["T3"], out_dir=tmp)
            if v.verdict != "accepted":
                log.warning("previews of %s: the reference's T3 did not pass (%s)", ex.slug, v.verdict)
            kept = blobs.put_folder(owner, tmp, file_cap=ex.limits.artifact_bytes)
        except BlobExists:  # made meanwhile by a host that did not take the lock (an older judge)
            return False
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        for problem in kept.problems:
            log.warning("previews of %s: %s", ex.slug, problem)
        blobs.prune(owner)
    log.info("built previews of %s", ex.slug)
    return True
