"""T2: the hand-checked case, padding that holds anything, inputs left untouched."""

import math

import torch

from judge.testing import Feedback, assert_close, describe, describe_inputs, leaf, sibling, visible

cases = sibling(__file__, "_cases")
NAN = math.nan


@visible
def test_hand_checked(sub):
    for dtype in (torch.float64, torch.float32):
        x = torch.tensor([[1.0, 2.0, 3.0], [4.0, NAN, NAN], [NAN, NAN, NAN]], dtype=dtype)
        mask = torch.tensor([[True, True, True], [True, False, False], [False, False, False]])
        inputs = {"x": x, "mask": mask}
        xl = leaf(x)
        out = sub.masked_mean(xl, mask)
        assert_close(out, torch.tensor([2.0, 4.0, 0.0], dtype=torch.float64),
                     what="masked_mean (hand-checked: [2, 4, 0])", inputs=inputs)
        out.sum().backward()
        expected = torch.tensor([[1 / 3, 1 / 3, 1 / 3], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
        assert_close(xl.grad, expected, what="d sum(masked_mean) / d x (hand-checked: 1/n on valid entries, "
                                             "exactly 0 on padding)", inputs=inputs)


def test_padding_is_never_read(sub, ctx):
    g = ctx.generator(201)
    for dtype in (torch.float64, torch.float32):
        x0, mask = cases.random_batch(g, 4, 5, dtype, fill=0.0, empty_row=1, single_row=2)
        out0 = sub.masked_mean(x0, mask)
        for fill in cases.FILLS:
            x = x0.masked_fill(~mask, fill)
            inputs = {"x": x, "mask": mask}
            xl = leaf(x)
            out = sub.masked_mean(xl, mask)
            assert_close(out, out0, what=f"masked_mean with padding {fill} (must equal the result with "
                                         f"padding 0)", inputs=inputs)
            out.sum().backward()
            bad = (~mask & (xl.grad != 0)) | torch.isnan(xl.grad)
            if bool(bad.any()):
                raise Feedback(f"with padding {fill}, padded positions must get gradient exactly 0 and no "
                               f"position NaN; got {describe(xl.grad)} (select with torch.where, never "
                               f"x * mask){describe_inputs(inputs)}")


def test_inputs_are_not_mutated(sub, ctx):
    g = ctx.generator(202)
    x, mask = cases.random_batch(g, 3, 4, torch.float64, fill=1e30, empty_row=0)
    before = (x.clone(), mask.clone())
    sub.masked_mean(x, mask)
    if not (torch.equal(x, before[0]) and torch.equal(mask, before[1])):
        raise Feedback(f"masked_mean modified its inputs in place: x was {describe(before[0])}, afterwards "
                       f"{describe(x)} (build new tensors; never masked_fill_ or index assignment on an input)")
