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


def assert_changes(ms, expect):
    """Each id of ``expect`` is among the mutants ``ms`` (by id), with its (before, after)."""
    for mid, (before, after) in expect.items():
        assert mid in ms, f"{mid} not among {sorted(ms)}"
        assert (ms[mid].before, ms[mid].after) == (before, after), mid


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
    assert_changes(ms, expect)
    assert {m.operator for m in ms.values()} >= set(OPERATORS[:7])


def test_each_mutant_is_the_source_with_one_change():
    original = ast.unparse(ast.parse(SOURCE))
    for m in generate(SOURCE):
        compile(m.source, m.id, "exec")
        assert m.source != original
        # a statement's text is shown unindented: each of its lines is in the file
        assert all(s in original for s in m.before.splitlines()), m.id
        assert all(s in m.source for s in m.after.splitlines()), m.id


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
    assert {m.id for m in ms if m.line == 7} == {"solution.py:7:0.2->1.2",  # not the annotation
                                                 "solution.py:7:default:eps=0.2->0.1"}
    assert {m.operator for m in ms if m.line == 8} == {"constant", "guard"}  # != is not swapped


def test_the_cap_is_deterministic_and_shared_between_operators():
    ms = generate(SOURCE)
    assert select(ms, 0) == ms and select(ms, len(ms)) == ms
    present = {m.operator for m in ms}
    picked = select(ms, len(present))
    assert len(picked) == len(present) and picked == select(ms, len(present))
    assert {m.operator for m in picked} == present  # every operator represented
    order = [m.id for m in ms]
    assert [m.id for m in picked] == [i for i in order if i in {m.id for m in picked}]


@pytest.mark.parametrize("path", sorted(REFERENCE_DIR.glob("*/solution.py")), ids=lambda p: p.parent.name)
def test_every_reference_yields_compilable_mutants(path):
    ms = generate(path.read_text())
    assert ms, f"{path}: no mutants"
    for m in ms:
        compile(m.source, m.id, "exec")


# issue 17's classes of realistic mistakes, one operator each
SOURCE2 = textwrap.dedent('''\
    import torch

    MODES = ("none", "tis")


    def g(a, b, mask, mode="none", flag=False, k=4, *, scale=0.5):
        if mode not in MODES:
            raise ValueError(f"bad mode {mode}")
        if a.dim() == 2:
            a = a.clone()
        else:
            raise ValueError("a must be 2-D")
        if flag:
            b = b.double()
        r = torch.exp(a - b) + (a - b).exp()
        keep = torch.lt(r, 2.0) & r.ge(0.5)
        w = torch.where(keep, r, torch.zeros(()))
        out = w.to(a.dtype) if k > 1 else w
        return out * scale
    ''')


def test_the_operators_for_realistic_mistakes():
    ms = by_id(generate(SOURCE2))
    expect = {
        "solution.py:7:guard->removed": ("if mode not in MODES:\n    raise ValueError(f'bad mode {mode}')", ""),
        "solution.py:12:raise->removed": ("raise ValueError('a must be 2-D')", "pass"),
        "solution.py:6:default:mode='none'->'tis'": ("mode='none'", "mode='tis'"),
        "solution.py:6:default:flag=False->True": ("flag=False", "flag=True"),
        "solution.py:6:default:k=4->2": ("k=4", "k=2"),
        "solution.py:6:default:scale=0.5->0.25": ("scale=0.5", "scale=0.25"),
        "solution.py:17:where->mul": ("torch.where(keep, r, torch.zeros(()))", "r * keep + torch.zeros(()) * ~keep"),
        "solution.py:15:exp(a-b)->exp(a)/exp(b)": ("torch.exp(a - b)", "torch.exp(a) / torch.exp(b)"),
        "solution.py:15:exp(a-b)->exp(a)/exp(b)#2": ("(a - b).exp()", "a.exp() / b.exp()"),
        "solution.py:10:clone->removed": ("a.clone()", "a"),
        "solution.py:14:double->removed": ("b.double()", "b"),
        "solution.py:18:to->removed": ("w.to(a.dtype)", "w"),
        "solution.py:16:lt->le": ("torch.lt(r, 2.0)", "torch.le(r, 2.0)"),
        "solution.py:16:ge->gt": ("r.ge(0.5)", "r.gt(0.5)"),
        "solution.py:9:if->then": ("if a.dim() == 2:\n    a = a.clone()\nelse:\n    raise ValueError('a must be 2-D')",
                                   "a = a.clone()"),
        "solution.py:9:if->else": ("if a.dim() == 2:\n    a = a.clone()\nelse:\n    raise ValueError('a must be 2-D')",
                                   "raise ValueError('a must be 2-D')"),
        "solution.py:13:if->always": ("if flag:\n    b = b.double()", "b = b.double()"),
        "solution.py:13:if->never": ("if flag:\n    b = b.double()", ""),
        "solution.py:18:ifexp->then": ("w.to(a.dtype) if k > 1 else w", "w.to(a.dtype)"),
        "solution.py:18:ifexp->else": ("w.to(a.dtype) if k > 1 else w", "w"),
    }
    assert_changes(ms, expect)
    assert {m.operator for m in ms.values()} >= set(OPERATORS[7:13])
    removed = ms["solution.py:13:if->never"].source
    assert "flag:" not in removed and "b.double()" not in removed
    guard = ms["solution.py:7:guard->removed"].source
    assert "bad mode" not in guard and "def g(" in guard
    compile(guard, "guard", "exec")


def test_arithmetic_and_negation_are_swapped_one_at_a_time():
    """``arith``: + <-> -, * <-> / (augmented assignments too); ``negate``: -x -> x, where x is
    an expression (a negative number is ``constant``'s: -1 -> 0)."""
    ms = by_id(generate(textwrap.dedent('''\
        def h(x, n):
            y = -x.sum() / n
            y += x.mean() * 2
            return y - 1 + x * -1
        ''')))
    expect = {
        "solution.py:2:Div->Mult": ("-x.sum() / n", "-x.sum() * n"),
        "solution.py:2:-x->x": ("-x.sum()", "x.sum()"),
        "solution.py:3:Add->Sub": ("y += x.mean() * 2", "y -= x.mean() * 2"),
        "solution.py:3:Mult->Div": ("x.mean() * 2", "x.mean() / 2"),
        "solution.py:4:Sub->Add": ("y - 1", "y + 1"),
        "solution.py:4:Mult->Div": ("x * -1", "x / -1"),
    }
    assert_changes(ms, expect)
    assert not any(m.operator == "negate" and m.line == 4 for m in ms.values())  # -1 is a number


def test_swapped_arguments_of_a_used_call_and_of_where():
    """``swap``: torch.where(c, a, b) -> torch.where(c, b, a); a call of a plain function whose
    value is used gets its first two arguments exchanged (the argument-order mistake); a call
    made for its effect (a validation helper), a builtin (max is minmax's) and two equal
    arguments are left alone."""
    ms = [m for m in generate(textwrap.dedent('''\
        import torch


        def _ratio(a, b):
            return torch.exp(a - b)


        def _check(a, b):
            pass


        def h(x, y, m):
            _check(x, y)
            r = _ratio(x, y)
            return torch.where(m, r, torch.zeros(())), max(x, y), _ratio(x, x)
        ''')) if m.operator == "swap"]
    assert [(m.id, m.before, m.after) for m in ms] == [
        ("solution.py:14:_ratio-args<->", "_ratio(x, y)", "_ratio(y, x)"),
        ("solution.py:15:where-a<->b", "torch.where(m, r, torch.zeros(()))",
         "torch.where(m, torch.zeros(()), r)")]


def test_two_operators_that_build_the_same_module_count_once():
    src = "def f(x, n=1):\n    return x + n\n"
    ms = generate(src)
    assert len({m.source for m in ms}) == len(ms)
    assert [m.operator for m in ms if "n=2" in m.source] == ["constant"]  # default's n=1->2 is the same file


def test_a_block_left_empty_gets_a_pass():
    ms = by_id(generate("def f(x):\n    if x < 0:\n        raise ValueError('negative')\n"))
    m = ms["solution.py:2:guard->removed"]
    assert "pass" in m.source
    compile(m.source, m.id, "exec")


def test_the_cast_of_a_mask_count_is_left_alone():
    src = ("def f(x, valid, a):\n    n = valid.sum(-1).clamp(min=1).to(x.dtype)\n"
           "    return x.sum(-1) / n + a.to(x.dtype)\n")
    casts = [m.before for m in generate(src) if m.operator == "cast"]
    assert casts == ["a.to(x.dtype)"]  # an integer count divides a float exactly: always equivalent
