"""An exercise's catalogue of known mistakes, read from its trusted ``reference/<slug>/`` folder.

- ``wrong.toml``: one ``[[wrong]]`` entry per mistake, declared as edits of ``solution.py``::

      [[wrong]]
      name = "inclusive_endpoints"             # the mistake's name (a file stem: [A-Za-z][A-Za-z0-9_]*)
      expect = "T2"                            # the tier that must reject it
      why = "I kept ratios that sit exactly on a bound ..."   # one sentence, in a learner's words
      spec_section = "Formulas"                # the spec.md heading the mistake violates
      replace = [["(ratio > 1.0 - clip_low)", "(ratio >= 1.0 - clip_low)"]]

  Each pair's ``old`` must occur exactly once in the file as it stands when the pair is applied
  (the reference for the first pair), so a changed reference fails loudly, naming the entry.
- ``wrong/<name>.py``: a mistake that is structurally different from the reference, a whole file
  whose docstring's first line is the ``why`` and which declares ``expect: T<n>`` and
  ``spec: <heading>`` on lines of their own.
- ``mutants.toml``: the automatic mutants (``judge.authoring.mutate``) that are equivalent to the
  reference, one ``[[equivalent]]`` entry each with its ``id`` and ``reason``. They live here,
  not in the learner-visible ``exercise.toml``, because a reason reveals the reference's lines.

Every problem is an ``ExerciseError`` naming the file and the entry.
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from judge.errors import ExerciseError

TIERS = ("T0", "T1", "T2", "T3")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_EXPECT = re.compile(r"^\s*expect:\s*(T[0-3])\b", re.MULTILINE)
_SPEC = re.compile(r"^\s*spec:\s*(.+?)\s*$", re.MULTILINE)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_WRONG_KEYS = {"name", "expect", "why", "spec_section", "replace"}


@dataclass(frozen=True)
class WrongSolution:
    name: str  # the mistake's name, e.g. "inclusive_endpoints"
    path: Path  # where it is declared: reference/<slug>/wrong.toml or wrong/<name>.py
    expect_tier: str  # the tier that must reject it ("T0".."T3")
    why: str  # one sentence in a learner's words naming the mistake
    spec_section: str  # the spec.md heading it violates ("" when a wrong/*.py file names none)
    source: str  # the built file: the reference with the edits applied, or the file's text

    @property
    def summary(self) -> str:
        """The one-line description (the ``why``)."""
        return self.why

    @property
    def label(self) -> str:
        """How reports name it: ``wrong.toml:<name>`` or ``wrong/<name>.py``."""
        return f"wrong.toml:{self.name}" if self.path.suffix == ".toml" else f"wrong/{self.name}.py"

    def load(self, module_name: str) -> ModuleType:
        """The built file imported as the module ``module_name`` (once: later calls return it).
        Trusted callers only: it runs in the calling process, never in a sandbox."""
        if module_name in sys.modules:
            return sys.modules[module_name]
        mod = ModuleType(module_name)
        mod.__file__ = f"{self.path.parent}/{self.label}"
        sys.modules[module_name] = mod
        try:
            exec(compile(self.source, mod.__file__, "exec"), mod.__dict__)  # noqa: S102 - trusted
        except Exception as e:
            del sys.modules[module_name]
            raise ExerciseError(f"{self.label} failed to import: {type(e).__name__}: {e}") from e
        return mod


@dataclass(frozen=True)
class EquivalentMutant:
    id: str  # "solution.py:42:LtE->Lt", as judge.authoring.mutate names it
    reason: str  # why no test can tell it from the reference


def spec_headings(spec_path: Path) -> list[str]:
    """The headings of ``spec.md``, without their ``#`` marks, in order."""
    text = spec_path.read_text() if spec_path.is_file() else ""
    return _HEADING.findall(re.sub(r"```.*?```", "", text, flags=re.DOTALL))


def apply_edits(source: str, replace: list[tuple[str, str]], where: str) -> str:
    """``source`` with each ``(old, new)`` applied in order; ``old`` must occur exactly once."""
    for k, (old, new) in enumerate(replace):
        n = source.count(old)
        if n != 1:
            found = "does not occur" if n == 0 else f"occurs {n} times"
            raise ExerciseError(f"{where}: replace[{k}]'s old text {old[:80]!r} {found} in the "
                                f"reference (it must match exactly once: update the entry)")
        source = source.replace(old, new)
    return source


def _entry_text(path: Path, k: int, e: dict, key: str) -> str:
    v = e.get(key)
    if not isinstance(v, str) or not v.strip():
        raise ExerciseError(f"{path}: wrong[{k}] ({e.get('name', '?')}) needs a non-empty string {key!r}")
    return v.strip()


def _toml_entries(path: Path, table: str) -> list:
    """The ``[[table]]`` entries of the TOML file ``path``, which may hold nothing else."""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ExerciseError(f"{path}: invalid TOML: {e}") from e
    entries = data.get(table, [])
    if not isinstance(entries, list) or set(data) - {table}:
        raise ExerciseError(f"{path}: holds only [[{table}]] entries")
    return entries


def _from_toml(path: Path, reference: str, headings: list[str]) -> list[WrongSolution]:
    entries = _toml_entries(path, "wrong")
    out = []
    for k, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ExerciseError(f"{path}: wrong[{k}] must be a table")
        extra = set(e) - _WRONG_KEYS
        if extra:
            raise ExerciseError(f"{path}: wrong[{k}] has unknown keys {sorted(extra)}")
        name, tier, why, section = (_entry_text(path, k, e, key)
                                    for key in ("name", "expect", "why", "spec_section"))
        where = f"{path}: wrong entry {name!r}"
        if not _NAME.match(name):
            raise ExerciseError(f"{where}: a name matches {_NAME.pattern}")
        if tier not in TIERS:
            raise ExerciseError(f"{where}: expect must be one of {', '.join(TIERS)}, got {tier!r}")
        if section not in headings:
            raise ExerciseError(f"{where}: spec_section {section!r} is not a heading of spec.md "
                                f"(one of: {'; '.join(headings)})")
        pairs = e.get("replace")
        if (not isinstance(pairs, list) or not pairs
                or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(s, str) for s in p)
                           and p[0] and p[0] != p[1] for p in pairs)):
            raise ExerciseError(f"{where}: replace is a non-empty list of [old, new] string pairs, "
                                f"old non-empty and different from new")
        source = apply_edits(reference, [(a, b) for a, b in pairs], where)
        out.append(WrongSolution(name, path, tier, why, section, source))
    return out


def _from_file(path: Path, headings: list[str]) -> WrongSolution:
    text = path.read_text()
    m = _EXPECT.search(text)
    if not m:
        raise ExerciseError(f"{path}: a known-wrong solution declares 'expect: T<n>' in its docstring")
    doc = re.search(r'"""\s*(.+)', text)
    spec = _SPEC.search(text)
    section = spec.group(1) if spec else ""
    if section and section not in headings:
        raise ExerciseError(f"{path}: spec: {section!r} is not a heading of spec.md "
                            f"(one of: {'; '.join(headings)})")
    return WrongSolution(path.stem, path, m.group(1), doc.group(1).strip() if doc else "", section, text)


def load_wrong_solutions(reference_dir: Path, spec_path: Path) -> list[WrongSolution]:
    """The known-wrong solutions of ``wrong.toml`` and ``wrong/*.py``, by name."""
    headings = spec_headings(spec_path)
    out = [_from_file(p, headings) for p in sorted((reference_dir / "wrong").glob("*.py"))]
    toml_path = reference_dir / "wrong.toml"
    if toml_path.is_file():
        solution = reference_dir / "solution.py"
        if not solution.is_file():
            raise ExerciseError(f"{toml_path}: edits {solution}, which is missing")
        out += _from_toml(toml_path, solution.read_text(), headings)
    names = [w.name for w in out]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise ExerciseError(f"{reference_dir}: known-wrong solution(s) {dups} declared more than once "
                            f"(wrong.toml and wrong/*.py share one namespace)")
    return sorted(out, key=lambda w: w.name)


def load_equivalent_mutants(reference_dir: Path) -> list[EquivalentMutant]:
    """The ``[[equivalent]]`` entries of ``mutants.toml`` (none when the file is absent)."""
    path = reference_dir / "mutants.toml"
    if not path.is_file():
        return []
    entries = _toml_entries(path, "equivalent")
    out = []
    for k, e in enumerate(entries):
        if not isinstance(e, dict) or not str(e.get("id", "")).strip() or not str(e.get("reason", "")).strip():
            raise ExerciseError(f"{path}: equivalent[{k}] needs an id and a non-empty reason")
        out.append(EquivalentMutant(id=str(e["id"]).strip(), reason=str(e["reason"]).strip()))
    ids = [e.id for e in out]
    dups = sorted({i for i in ids if ids.count(i) > 1})
    if dups:
        raise ExerciseError(f"{path}: lists {dups} more than once")
    return out
