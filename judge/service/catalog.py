"""The exercises a service serves, and where their static previews are cached.

Unlike ``judge.exercise.discover`` (which fails on the first broken folder, as an author's check
should), a service skips a broken folder with a warning and serves the others.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from judge.service.config import Config
from judge.errors import JudgeError
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


def preview_dir(cfg: Config, ex: Exercise) -> Path:
    """Where the reference's T3 artifacts for ``ex`` are (or will be) cached."""
    return Path(cfg.data_dir) / "previews" / ex.slug / preview_digest(ex)
