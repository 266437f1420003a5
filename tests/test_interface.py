"""Interface mutants (judge.authoring.interface): each wrapper makes its mistake and only that one,
keeps the reference's validation, and has a stable id."""

from __future__ import annotations

import textwrap
import types

import pytest
import torch

from judge.authoring.interface import generate

SOURCE = textwrap.dedent('''\
    import torch


    def loss(x, advantages, mask, low=0.5, high=2.0, per_row=False):
        if x.dim() != 2:
            raise ValueError("x must be 2-D")
        m = mask.bool()
        terms = torch.where(m, x.clamp(low, high) * advantages[:, None], torch.zeros(()))
        if per_row:
            return (terms.sum(-1) / m.sum(-1).clamp(min=1)).sum() / max(1, x.shape[0])
        return terms.sum() / m.sum().clamp(min=1)


    def helper(x):
        return x
    ''')


def _mutants():
    return {m.id: m for m in generate(SOURCE, ["loss", "absent"])}


def _load(m):
    mod = types.ModuleType("mutant")
    exec(compile(m.source, "solution.py", "exec"), mod.__dict__)
    return mod.loss


def _batch(dtype=torch.float64):
    x = torch.tensor([[0.1, 1.0, 3.0], [1.5, 0.7, 0.2], [0.9, 0.9, 0.9]], dtype=dtype)
    adv = torch.tensor([1.0, 0.0, -2.0], dtype=dtype)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0]], dtype=torch.bool)
    return x, adv, mask


def test_the_ids_and_operators_of_a_declared_function():
    ms = _mutants()
    pairs = [f"solution.py:4:alone:{p}|{q}" for p in ("low", "high", "per_row")
             for q in ("low", "high", "per_row") if p != q]
    assert set(ms) == set(pairs) | {"solution.py:4:rows:zero-advantage", "solution.py:4:rows:empty",
                                    "solution.py:4:precision:float32", "solution.py:4:order:low<->high",
                                    "solution.py:4:order:high<->per_row"}
    assert {m.operator for m in ms.values()} == {"alone", "rows", "precision", "order"}
    assert all(m.line == 4 and SOURCE.rstrip("\n") in m.source for m in ms.values())
    # a function without mask and advantages gets no rows mutants; an undeclared one nothing
    helper = {m.id for m in generate(SOURCE, ["helper"])}
    assert helper == {"solution.py:14:precision:float32"}


def test_alone_drops_a_parameter_unless_its_partner_is_given():
    ref = types.ModuleType("ref")
    exec(compile(SOURCE, "solution.py", "exec"), ref.__dict__)
    f = _load(_mutants()["solution.py:4:alone:low|high"])
    x, adv, mask = _batch()
    assert torch.equal(f(x, adv, mask, low=0.8), ref.loss(x, adv, mask))  # low dropped
    assert torch.equal(f(x, adv, mask, low=0.8, high=1.9), ref.loss(x, adv, mask, low=0.8, high=1.9))
    assert torch.equal(f(x, adv, mask, 0.8, 1.9), ref.loss(x, adv, mask, 0.8, 1.9))  # by position
    assert not torch.equal(ref.loss(x, adv, mask, low=0.8), ref.loss(x, adv, mask))
    with pytest.raises(ValueError, match="2-D"):  # the reference's validation, as given
        f(x[0], adv, mask, low=0.8)


def test_rows_drop_zero_advantage_or_empty_responses():
    ref = types.ModuleType("ref")
    exec(compile(SOURCE, "solution.py", "exec"), ref.__dict__)
    x, adv, mask = _batch()
    zero = _load(_mutants()["solution.py:4:rows:zero-advantage"])
    keep = torch.tensor([0, 2])
    assert torch.equal(zero(x, adv, mask), ref.loss(x[keep], adv[keep], mask[keep]))
    assert not torch.equal(zero(x, adv, mask), ref.loss(x, adv, mask))  # N lost row 1's tokens
    empty = _load(_mutants()["solution.py:4:rows:empty"])
    keep = torch.tensor([0, 1])
    assert torch.equal(empty(x, adv, mask, per_row=True), ref.loss(x[keep], adv[keep], mask[keep], per_row=True))
    assert torch.equal(empty(x, adv, mask), ref.loss(x, adv, mask))  # a token-mean: the same
    assert empty(x[:0], adv[:0], mask[:0]) == 0  # B = 0: nothing to drop


def test_precision_computes_float64_in_float32_and_casts_back():
    ref = types.ModuleType("ref")
    exec(compile(SOURCE, "solution.py", "exec"), ref.__dict__)
    f = _load(_mutants()["solution.py:4:precision:float32"])
    x, adv, mask = _batch()
    x = x + 1e-9
    got, want = f(x, adv, mask), ref.loss(x, adv, mask)
    assert got.dtype == want.dtype == torch.float64
    assert got != want and abs(got - want) < 1e-6
    x32, adv32, _ = _batch(torch.float32)
    assert torch.equal(f(x32, adv32, mask), ref.loss(x32, adv32, mask))  # float32: nothing to lose


def test_order_swaps_two_neighbouring_parameters_of_a_positional_call():
    ref = types.ModuleType("ref")
    exec(compile(SOURCE, "solution.py", "exec"), ref.__dict__)
    f = _load(_mutants()["solution.py:4:order:low<->high"])
    x, adv, mask = _batch()
    assert torch.equal(f(x, adv, mask, 0.8, 1.9), ref.loss(x, adv, mask, 1.9, 0.8))
    assert torch.equal(f(x, adv, mask, low=0.8, high=1.9), ref.loss(x, adv, mask, low=0.8, high=1.9))
