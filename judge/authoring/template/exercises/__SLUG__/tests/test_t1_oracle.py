"""T1: masked means and their gradients against the scalar-loop oracle on fresh random inputs,
from the smallest case to the largest; the first (smallest) mismatch is reported."""

import torch

from judge.testing import Feedback, assert_close, check_tensor, describe_inputs, leaf, sibling, visible

cases = sibling(__file__, "_cases")

SMALL = ((1, 1), (1, 3), (2, 3))
ALL = SMALL + ((3, 2), (3, 4), (4, 4), (5, 3), (4, 7), (8, 8))


def _check_cases(sub, oracle, ctx, sizes, salt):
    g = ctx.generator(salt)
    for k, (B, L) in enumerate(sizes):
        for dtype in (torch.float64, torch.float32):
            x, mask = cases.random_batch(g, B, L, dtype, fill=cases.FILLS[k % len(cases.FILLS)],
                                         empty_row=0 if B >= 2 and k % 2 else None,
                                         single_row=B - 1 if B >= 2 else None, float_mask=k % 3 == 2)
            inputs = {"x": x, "mask": mask}
            xl = leaf(x)
            out = sub.masked_mean(xl, mask)
            check_tensor(out, what="masked_mean", shape=(B,), dtype=dtype)
            assert_close(out, oracle.masked_mean(x, mask), what="masked_mean", inputs=inputs)
            out.sum().backward()
            if xl.grad is None:
                raise Feedback("masked_mean: no gradient reached x" + describe_inputs(inputs))
            assert_close(xl.grad, oracle.masked_mean_grad(x, mask), what="d sum(masked_mean) / d x",
                         inputs=inputs)


@visible
def test_small_random_cases_match_oracle(sub, oracle, ctx):
    _check_cases(sub, oracle, ctx, SMALL, salt=101)


def test_random_cases_match_oracle(sub, oracle, ctx):
    _check_cases(sub, oracle, ctx, ALL, salt=102)
