"""The documentation stays true: a short README, links that resolve, one configuration table equal
to ``Config``, no pointer to a file outside the repository, dated measurements."""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

import pytest

from judge.cli import _parser
from judge.exercise import REPO_ROOT
from judge.service.config import PREFIX, Config

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
PAGES = [README] + sorted(DOCS.glob("*.md"))
# Settings read outside Config, each with the module that reads it (they still belong in the table).
OUTSIDE_CONFIG = {"JUDGE_SCRATCH_DIR": "judge/box/sandbox.py"}
# A JUDGE_* variable the judge's code reads from an environment (os.environ.get, os.getenv, [...]).
_READ = re.compile(r"""(?:\.get\(|getenv\(|environ\[)\s*["'](JUDGE_[A-Z][A-Z_]*)["']""")
# Documents of the project's brief that live outside this repository: nothing may point to them.
OUTSIDE_REPO = ("AUTHORING.md", "SECURITY.md", "SANDBOX-NOTES", "DESIGN-NOTES", "EXERCISES.md")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {anchor(h) for h in _HEADING.findall(_FENCE.sub("", page.read_text()))}


def config_table() -> dict[str, tuple[str, str]]:
    """docs/service.md's configuration table: variable -> (default, meaning)."""
    text = (DOCS / "service.md").read_text()
    section = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| `(JUDGE_[A-Z_]+)` \| (.*?) \| (.*) \|$", line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} is in the table twice"
            rows[m.group(1)] = (m.group(2), m.group(3))
    return rows


def test_the_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the rest belongs in docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_every_relative_link_resolves(page):
    bad = []
    for target in _LINK.findall(_FENCE.sub("", page.read_text())):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            bad.append(f"{target}: no heading #{frag} in {dest.name}")
    assert not bad, bad


def test_every_page_in_docs_is_linked_from_the_readme():
    linked = {(README.parent / t.partition("#")[0]).resolve()
              for t in _LINK.findall(README.read_text()) if not re.match(r"^[a-z]+:", t)}
    orphans = [p.name for p in DOCS.iterdir() if p.resolve() not in linked]
    assert not orphans, f"docs/ pages the README does not link: {orphans}"


def test_the_readme_shows_the_layout_of_every_subpackage():
    layout = README.read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    packages = [p.parent for p in (REPO_ROOT / "judge").glob("*/__init__.py")]
    for top in ("judge/", "sandbox/", "exercises/", "reference/", "tests/"):
        assert f"\n{top}" in layout, top
    for pkg in packages:
        name = pkg.relative_to(REPO_ROOT).as_posix()
        assert f"{name}/" in layout or f" {pkg.name} " in layout, f"{name} is not in the README's layout"


def test_the_configuration_table_is_config():
    rows = config_table()
    fields = {f"{PREFIX}{f.name.upper()}": f for f in dataclasses.fields(Config)}
    assert set(rows) == set(fields) | set(OUTSIDE_CONFIG), (
        f"docs/service.md lacks {sorted((set(fields) | set(OUTSIDE_CONFIG)) - set(rows))}, "
        f"or lists what Config has not: {sorted(set(rows) - set(fields) - set(OUTSIDE_CONFIG))}")
    for name, f in fields.items():
        if f.default is dataclasses.MISSING or not f.default:
            continue  # a default that depends on the machine, or "unset" / "all", said in words
        value = f.default
        shown = ("1" if value else "0") if isinstance(value, bool) else (
            f"{value:g}" if isinstance(value, float) else str(value))
        assert f"`{shown}`" in rows[name][0], f"{name}: Config's default is {shown!r}, the table says {rows[name][0]!r}"
    for name, module in OUTSIDE_CONFIG.items():
        assert f'"{name}"' in (REPO_ROOT / module).read_text(), f"{module} no longer reads {name}"


def test_every_setting_the_code_reads_is_in_a_table():
    """The service's own settings are docs/service.md's table; another part's (a client's, say)
    may be documented in a table of its own page, a row per variable: | `JUDGE_X` | ... |."""
    rows = set(config_table())
    for page in PAGES:
        rows |= set(re.findall(r"^\| `(JUDGE_[A-Z_]+)` \|", page.read_text(), re.MULTILINE))
    names = set()
    for p in list((REPO_ROOT / "judge").rglob("*.py")) + list((REPO_ROOT / "sandbox").rglob("*.py")):
        names |= set(_READ.findall(p.read_text()))
    assert "JUDGE_SCRATCH_DIR" in names  # the scan finds what it is meant to find
    missing = names - rows
    assert not missing, f"read by the code but in no configuration table of README.md or docs/: {sorted(missing)}"


def test_nothing_points_to_documents_outside_the_repository():
    bad = []
    for top in ("README.md", "Makefile", "pyproject.toml", "docs", "judge", "sandbox", "exercises",
                "reference", "scripts"):
        base = REPO_ROOT / top
        for p in [base] if base.is_file() else base.rglob("*"):
            if p.is_file() and p.suffix in (".py", ".md", ".toml", ".sh", "") and "__pycache__" not in p.parts:
                text = p.read_text(errors="replace")
                bad += [f"{p.relative_to(REPO_ROOT)}: {name}" for name in OUTSIDE_REPO if name in text]
    assert not bad, bad


def test_every_measured_section_of_performance_is_dated():
    text = (DOCS / "performance.md").read_text()
    undated = [h for h in re.findall(r"^## (.+)$", text, re.MULTILINE)
               if h not in ("The design, in short", "How to measure")
               and not re.search(r"\d{4}-\d{2}-\d{2}", h)]
    assert not undated, f"performance.md sections without the date of their run: {undated}"


def test_every_judge_command_shown_is_one_the_cli_accepts():
    """Each ``judge ...`` line of a shell block in README.md and docs/ parses (it is not run)."""
    shown = []
    for page in PAGES:
        for block in re.findall(r"^```sh\n(.*?)^```", page.read_text(), re.MULTILINE | re.DOTALL):
            for line in block.splitlines():
                if line.lstrip().startswith("judge "):
                    shown.append((page.name, shlex.split(line, comments=True)[1:]))
    assert len(shown) >= 15, shown
    parser = _parser()
    for name, argv in shown:
        try:
            parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"{name}: `judge {shlex.join(argv)}` is not a command judge accepts")


# docs/page.md ("Title", "Other") or docs/page.md, "Title": the titles are short and capitalised
_SECTION_REF = re.compile(r"""docs/([\w-]+\.md)(?:\s*\(|,\s*)((?:"[A-Z][^"]{0,60}"(?:,\s*)?)+)""")


def test_every_section_the_code_points_to_exists():
    """``docs/performance.md ("The child")`` in a comment or docstring names a heading or a bold
    label of that page (the why stays in the code, the measurements in docs/)."""
    bad, seen = [], 0
    for top in ("judge", "sandbox", "exercises", "docs", "tests"):
        for p in (REPO_ROOT / top).rglob("*"):
            if not p.is_file() or p.suffix not in (".py", ".md", ".toml") or "__pycache__" in p.parts \
                    or p.resolve() == Path(__file__).resolve():
                continue
            # comment and docstring lines wrapped mid-title are joined first
            text = re.sub(r"\s*\n\s*(?:#\s*)?", " ", p.read_text(errors="replace"))
            for page, titles in _SECTION_REF.findall(text):
                doc = DOCS / page
                body = re.sub(r"\s+", " ", doc.read_text()) if doc.is_file() else ""
                for title in re.findall(r'"([^"]+)"', titles):
                    seen += 1
                    if not doc.is_file() or title not in body:
                        bad.append(f"{p.relative_to(REPO_ROOT)}: docs/{page} has no section {title!r}")
    assert seen >= 3, "the scan found no section references at all"
    assert not bad, bad


def test_the_mutation_operators_table_is_mutates():
    from judge.authoring.mutate import OPERATORS

    text = (DOCS / "authoring.md").read_text().split("### Mutation testing", 1)[1]
    shown = [op for op in re.findall(r"^\| ([a-z]+) \| ", text, re.MULTILINE) if op != "operator"]
    assert shown == list(OPERATORS), f"docs/authoring.md lists {shown}; judge.authoring.mutate has {OPERATORS}"
