"""judge.tuning holds the performance settings: each is used, and no judge module defines its
own copy of one (a setting measured once is changed in one place)."""

from __future__ import annotations

import ast
from pathlib import Path

import judge.tuning as tuning

JUDGE = Path(tuning.__file__).resolve().parent
SETTINGS = sorted(n for n in vars(tuning) if n.isupper())


def _modules():
    for path in sorted(JUDGE.rglob("*.py")):
        if path != Path(tuning.__file__).resolve() and "template" not in path.relative_to(JUDGE).parts:
            yield path, ast.parse(path.read_text(), str(path))


def test_the_settings_are_there():
    assert {"SPIN_SECONDS", "SPARE_DELAY", "SPARES_AHEAD", "ANSWER_FIRST_S", "FLUSH_DELAY",
            "INLINE_DOCUMENT_BYTES"} <= set(SETTINGS)


def test_no_module_defines_a_setting_of_its_own():
    copies = []
    for path, tree in _modules():
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            copies += [f"{path.relative_to(JUDGE)}:{node.lineno} {t.id}" for t in targets
                       if isinstance(t, ast.Name) and t.id in SETTINGS]
    assert not copies, copies


def test_every_setting_is_imported_from_judge_tuning():
    used = set()
    for _, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "judge.tuning":
                used |= {a.name for a in node.names}
    assert used == set(SETTINGS), set(SETTINGS) ^ used
