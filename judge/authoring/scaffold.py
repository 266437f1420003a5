'''``judge new <slug>``: a new exercise folder with a small working example.

The example is one function, ``masked_mean(x, mask) -> Tensor[B]`` (the mean of each row's valid
entries, 0 for an empty row, padding never read), with a scalar-loop oracle, tests in all four
tiers, a T3 toy that fits one parameter per row by gradient descent through the submission, and
two known-wrong solutions. It passes ``judge validate`` as generated, every automatic mutant of
its reference included; an author replaces it piece by piece and re-runs ``judge validate``.
'''

from __future__ import annotations

import re
from pathlib import Path

from judge.errors import UsageError
from judge.exercise import exercises_dir

_SLUG = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

# The example, as real files: ``template/exercises/__SLUG__/...`` and ``template/reference/__SLUG__/...``
# (package data, so it ships in the wheel). ``__SLUG__`` and ``__TITLE__`` are replaced, in paths
# and in text.
TEMPLATE = Path(__file__).resolve().parent / "template"


def template_files(template: Path = TEMPLATE) -> list[Path]:
    """The template's files (relative to it), sorted; bytecode caches left out."""
    return sorted(p.relative_to(template) for p in template.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def new_exercise(slug: str, *, root: Path | None = None, title: str | None = None) -> list[Path]:
    """Write the example exercise ``slug`` under ``root`` (exercises/ and reference/; default: the
    pack of ``exercises_dir()``); returns the files written. Refuses to touch an existing exercise
    or reference folder."""
    if not _SLUG.match(slug):
        raise UsageError(f"slug {slug!r} must match {_SLUG.pattern} (lower case, digits, underscores)")
    root = Path(root) if root is not None else exercises_dir().parent
    for part in ("exercises", "reference"):
        if (root / part / slug).exists():
            raise UsageError(f"{root / part / slug} already exists; choose another slug or remove it")
    title = title or f"{slug}: TODO title (generated example: masked mean)"
    if '"' in title or "\\" in title or "\n" in title:
        raise UsageError("the title may not contain quotes, backslashes or newlines")
    written = []
    for rel in template_files():
        path = root / str(rel).replace("__SLUG__", slug)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = (TEMPLATE / rel).read_text()
        path.write_text(text.replace("__SLUG__", slug).replace("__TITLE__", title))
        written.append(path)
    return written
