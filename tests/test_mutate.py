"""Mutant generation: each operator, stable ids, what is never mutated, the deterministic cap."""

from __future__ import annotations

import ast
import textwrap

import pytest

from judge.exercise import REFERENCE_DIR
from judge.authoring.mutate import OPERATORS, generate, select

SOURCE = textwrap.dedent('''\
    """Docstring: 1 < 2 is not code."""
    import torch

    EPS = 1e-8


    def f(x, mask, eps: float = 0.2):
        if x.dim() != 2:
            raise ValueError(f"x must be 2-D, got {x.dim() + 1}")
        valid = mask.bool()
        a = torch.where(valid, x.detach(), torch.zeros(()))
        b = x.clamp(1.0 - eps, 1.0 + eps)
        c = torch.minimum(a, b) * mask
        n = valid.sum(dim=-1).clamp(min=1)
        m = max(a.mean(), 0)
        ok = (n < 3) & (n >= 1)
        return c.masked_fill(~valid, 0.0).sum() / n + m + ok
    ''')


def by_id(mutants):
    return {m.id: m for m in mutants}


def test_each_operator_produces_its_mutants():
    ms = by_id(generate(SOURCE))
    expect = {
        "solution.py:16:Lt->LtE": ("n < 3", "n <= 3"),
        "solution.py:16:GtE->Gt": ("n >= 1", "n > 1"),
        "solution.py:13:minimum->maximum": ("torch.minimum(a, b)", "torch.maximum(a, b)"),
        "solution.py:15:max->min": ("max(a.mean(), 0)", "min(a.mean(), 0)"),
        "solution.py:12:clamp-min->None": ("x.clamp(1.0 - eps, 1.0 + eps)", "x.clamp(None, 1.0 + eps)"),
        "solution.py:12:clamp-max->None": ("x.clamp(1.0 - eps, 1.0 + eps)", "x.clamp(1.0 - eps, None)"),
        "solution.py:14:clamp-min->None": ("valid.sum(dim=-1).clamp(min=1)", "valid.sum(dim=-1)"),
        "solution.py:11:detach->removed": ("x.detach()", "x"),
        "solution.py:11:where->a": ("torch.where(valid, x.detach(), torch.zeros(()))", "x.detach()"),
        "solution.py:13:*mask->dropped": ("torch.minimum(a, b) * mask", "torch.minimum(a, b)"),
        "solution.py:17:masked_fill->dropped": ("c.masked_fill(~valid, 0.0)", "c"),
        "solution.py:14:sum->mean": ("valid.sum(dim=-1)", "valid.mean(dim=-1)"),
        "solution.py:15:mean->sum": ("a.mean()", "a.sum()"),
        "solution.py:4:1e-08->1.00000001": ("1e-08", "1.00000001"),
        "solution.py:7:0.2->1.2": ("0.2", "1.2"),
        "solution.py:14:-1->0": ("-1", "0"),
        "solution.py:8:2->3": ("2", "3"),
    }
    for mid, (before, after) in expect.items():
        assert mid in ms, f"{mid} not among {sorted(ms)}"
        assert (ms[mid].before, ms[mid].after) == (before, after), mid
    assert {m.operator for m in ms.values()} == set(OPERATORS)


def test_each_mutant_is_the_source_with_one_change():
    original = ast.unparse(ast.parse(SOURCE))
    for m in generate(SOURCE):
        compile(m.source, m.id, "exec")
        assert m.source != original
        assert m.before in original and m.after in m.source


def test_ids_are_unique_stable_and_number_repeats_on_a_line():
    a, b = generate(SOURCE), generate(SOURCE)
    assert [m.id for m in a] == [m.id for m in b]
    ids = [m.id for m in a]
    assert len(ids) == len(set(ids))
    assert "solution.py:12:1.0->2.0" in ids and "solution.py:12:1.0->2.0#2" in ids
    assert generate(SOURCE, "other.py")[0].id.startswith("other.py:")


def test_error_messages_annotations_and_docstrings_are_not_mutated():
    ms = generate(SOURCE)
    assert not [m for m in ms if m.line in (1, 9)]  # the docstring; the raise with its f-string
    assert [m.id for m in ms if m.line == 7] == ["solution.py:7:0.2->1.2"]  # not the annotation
    assert not [m for m in ms if m.line == 8 and m.operator != "constant"]  # != is not swapped


def test_the_cap_is_deterministic_and_shared_between_operators():
    ms = generate(SOURCE)
    assert select(ms, 0) == ms and select(ms, len(ms)) == ms
    picked = select(ms, 8)
    assert len(picked) == 8 and picked == select(ms, 8)
    assert len({m.operator for m in picked}) == len(OPERATORS)  # every operator represented
    order = [m.id for m in ms]
    assert [m.id for m in picked] == [i for i in order if i in {m.id for m in picked}]


@pytest.mark.parametrize("path", sorted(REFERENCE_DIR.glob("*/solution.py")), ids=lambda p: p.parent.name)
def test_every_reference_yields_compilable_mutants(path):
    ms = generate(path.read_text())
    assert ms, f"{path}: no mutants"
    for m in ms:
        compile(m.source, m.id, "exec")
