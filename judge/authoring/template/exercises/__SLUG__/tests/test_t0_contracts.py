"""T0: what masked_mean returns (type, shape, dtype, graph), what it rejects, empty rows."""

import torch

from judge.testing import Feedback, check_tensor, describe, expect_raises, leaf, visible


def _inputs(B, L, dtype):
    x = torch.linspace(-1.0, 2.0, B * L, dtype=dtype).reshape(B, L)
    mask = torch.ones(B, L, dtype=torch.bool)
    mask[0, -1] = False
    return x, mask


@visible
def test_returns_one_mean_per_row(sub):
    for B, L in ((3, 5), (4, 2), (1, 1)):
        for dtype in (torch.float32, torch.float64):
            x, mask = _inputs(B, L, dtype)
            out = sub.masked_mean(x, mask)
            # shape [B]: one mean per row (not a scalar, not [B, 1]), in x's dtype
            check_tensor(out, what=f"masked_mean on [{B}, {L}] {dtype} inputs", shape=(B,), dtype=dtype)


@visible
def test_bool_and_float_masks_are_accepted(sub):
    for mask_dtype in (torch.bool, torch.float32, torch.float64):
        x, mask = _inputs(3, 4, torch.float64)
        check_tensor(sub.masked_mean(x, mask.to(mask_dtype)), what=f"masked_mean with a {mask_dtype} mask",
                     shape=(3,), dtype=torch.float64)


@visible
def test_output_stays_connected_to_x(sub):
    x, mask = _inputs(3, 4, torch.float64)
    out = sub.masked_mean(leaf(x), mask)
    check_tensor(out, what="masked_mean", shape=(3,))
    if not out.requires_grad:
        raise Feedback("masked_mean returned a tensor without a graph (requires_grad=False) although x "
                       "requires grad: do not detach, do not build a new tensor from the values")


@visible
def test_shape_mismatches_raise_value_error(sub):
    x, mask = _inputs(3, 4, torch.float64)
    bad = [("a 1-D x and mask of shape (4,)", x[0], mask[0]),
           ("a 3-D x and mask of shape (3, 4, 1)", x[..., None], mask[..., None]),
           ("x of shape (3, 4) and mask of shape (3, 3)", x, mask[:, :3]),
           ("x of shape (3, 4) and mask of shape (2, 4)", x, mask[:2])]
    for what, a, m in bad:
        expect_raises(ValueError, sub.masked_mean, a, m, what=f"masked_mean with {what}")


@visible
def test_empty_rows_give_zero(sub):
    x = torch.tensor([[1.0, 2.0], [float("nan"), float("inf")]], dtype=torch.float64)
    mask = torch.tensor([[True, True], [False, False]])
    xl = leaf(x)
    out = sub.masked_mean(xl, mask)
    check_tensor(out, what="masked_mean", shape=(2,), dtype=torch.float64)
    if float(out[1].detach()) != 0.0:
        raise Feedback(f"the mean of a row with no valid entry must be exactly 0, got {describe(out)} for "
                       f"x {describe(x)} and mask {describe(mask)} (divide by max(n, 1), never by 0)")
    out.sum().backward()
    if xl.grad is None or not bool((xl.grad[1] == 0).all()):
        raise Feedback(f"an empty row must get gradient exactly 0, got {describe(xl.grad)}")
