"""The helpers tier tests are written with: comparisons that explain the first mismatch."""

import math

import pytest
import torch

from judge.testing import (SMALL_CHECK, Feedback, all_close, assert_close, check_count_loss, check_tensor,
                           expect_raises, tolerance)

F64 = torch.float64


def test_values_within_the_dtype_tolerance_pass():
    e = torch.tensor([1.0, -2.0, 0.0], dtype=F64)
    assert_close(e + 1e-13, e, what="x")
    assert_close((e + 1e-6).float(), e, what="x")  # float32 gets a float32-sized tolerance
    with pytest.raises(Feedback):
        assert_close(e + 1e-6, e, what="x")  # in float64 it does not


def test_the_first_mismatch_is_named_with_its_index_and_count():
    e = torch.zeros(2, 3, dtype=F64)
    a = e.clone()
    a[1, 2], a[0, 1] = 0.5, 0.25
    with pytest.raises(Feedback, match=r"w at index \(0, 1\): expected 0, got 0\.25 \(2 of 6 values differ"):
        assert_close(a, e, what="w")


@pytest.mark.parametrize("got,expected,equal_nan,ok", [
    (math.nan, math.nan, False, False),
    (math.nan, math.nan, True, True),
    (math.nan, 1.0, True, False),
    (1.0, math.nan, True, False),
    (math.inf, math.inf, False, True),
    (-math.inf, math.inf, False, False),
    (1e308, math.inf, False, False),
    (math.inf, 1e308, False, False),
])
def test_nans_and_infinities(got, expected, equal_nan, ok):
    a, e = torch.tensor([0.5, got], dtype=F64), torch.tensor([0.5, expected], dtype=F64)
    if ok:
        assert_close(a, e, what="v", equal_nan=equal_nan)
    else:
        with pytest.raises(Feedback, match=r"v at index \(1,\)"):
            assert_close(a, e, what="v", equal_nan=equal_nan)


def test_shape_and_type_mismatches_say_what_was_expected():
    with pytest.raises(Feedback, match=r"expected shape \(3,\), got \(1, 3\)"):
        assert_close(torch.zeros(1, 3), torch.zeros(3), what="x")
    with pytest.raises(Feedback, match="expected a tensor, got a Python float"):
        assert_close(0.0, torch.zeros(()), what="x")


def test_explicit_tolerances_override_the_dtype_defaults():
    e = torch.ones(4, dtype=F64)
    assert_close(e * 1.01, e, what="x", rtol=0.02)
    with pytest.raises(Feedback, match="rtol=0.001"):
        assert_close(e * 1.01, e, what="x", rtol=1e-3)
    assert tolerance(F64) < tolerance(torch.float32)


def test_check_tensor_and_expect_raises():
    assert check_tensor(torch.zeros(2), what="f", shape=(2,), dtype=torch.float32).shape == (2,)
    with pytest.raises(Feedback, match=r"a scalar loss has shape \(\), not \(1,\)"):
        check_tensor(torch.zeros(1), what="f", shape=())
    with pytest.raises(Feedback, match="expected ValueError, but nothing was raised"):
        expect_raises(ValueError, lambda: None, what="f")
    expect_raises(ValueError, int, "x", what="f")


def test_ctx_once_runs_a_failing_computation_once_and_raises_its_error_to_every_test():
    from judge.testing import Context
    ctx, runs = Context(seed=0), []

    def toy():
        runs.append(1)
        raise Feedback("sequence_ratio returned shape (1, 3000, 100), expected (3,)")

    for _ in range(3):
        with pytest.raises(Feedback, match="expected \\(3,\\)"):
            ctx.once("t3", toy)
    assert len(runs) == 1
    assert ctx.once("other", lambda: 5) == 5 and ctx.once("other", lambda: 6) == 5


def test_check_connected_zero_refuses_each_way_a_zero_loss_goes_wrong():
    import pytest
    import torch

    from judge.testing import Feedback, check_connected_zero

    def case(make):
        x = torch.tensor([1.0, float("nan")], dtype=torch.float64, requires_grad=True)
        return make(x), x

    ok, x = case(lambda x: torch.where(torch.tensor([False, False]), x, 0.0).sum())
    check_connected_zero(ok, what="loss", dtype=torch.float64, leaves={"logp": x}, why="w")
    nan, x = case(lambda x: (x * 0).sum())  # NaN padding times 0
    with pytest.raises(Feedback, match="exactly 0"):
        check_connected_zero(nan, what="loss", dtype=torch.float64, leaves={"logp": x}, why="w")
    detached, x = case(lambda x: torch.zeros((), dtype=torch.float64))
    with pytest.raises(Feedback, match="connected"):
        check_connected_zero(detached, what="loss", dtype=torch.float64, leaves={"logp": x}, why="w")
    leaky, x = case(lambda x: (x[:1] - x[:1].detach()).sum())  # 0, yet a gradient of 1
    with pytest.raises(Feedback, match="logp.grad"):
        check_connected_zero(leaky, what="loss", dtype=torch.float64, leaves={"logp": x}, why="w")
    wrong_dtype, x = case(lambda x: torch.where(torch.tensor([False, False]), x, 0.0).sum().float())
    with pytest.raises(Feedback):
        check_connected_zero(wrong_dtype, what="loss", dtype=torch.float64, leaves={"logp": x}, why="w")


SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e-12, 3e-13, 1e308, -1e308, math.inf, -math.inf, math.nan, 5e-324]


@pytest.mark.parametrize("n", [1, 3, SMALL_CHECK, SMALL_CHECK + 1, 100, 600])  # both of all_close's paths
@pytest.mark.parametrize("equal_nan", [False, True])
def test_all_close_decides_exactly_as_torch_allclose(n, equal_nan):
    # values near the tolerance boundary, infinities, NaN, overflowing differences, in every pairing
    g = torch.Generator().manual_seed(n)
    for trial in range(60):
        e = torch.randn(n, generator=g, dtype=torch.float64) * 10 ** float(torch.randint(-13, 4, (), generator=g))
        rtol, atol = [(1e-9, 1e-12), (2e-5, 1e-6), (0.0, 0.0), (1e-3, 0.0), (0.0, 1e-8)][trial % 5]
        step = (atol + rtol * e.abs()) * (1 + (torch.rand(n, generator=g, dtype=torch.float64) - 0.5) * 1e-6)
        a = e + step * torch.randint(-1, 2, (n,), generator=g).double()  # on, just inside or outside the bound
        for i in torch.randint(0, n, (int(torch.randint(0, 3, (), generator=g)),), generator=g).tolist():
            a[i] = SPECIAL[int(torch.randint(0, len(SPECIAL), (), generator=g))]
            if bool(torch.rand((), generator=g) < 0.5):
                e[i] = SPECIAL[int(torch.randint(0, len(SPECIAL), (), generator=g))]
        want = torch.allclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
        assert all_close(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan) == want, (a, e, rtol, atol)
        # and on a transposed (non-contiguous) view, as assert_close may pass one
        a2, e2 = a.repeat(2, 1).t(), e.repeat(2, 1).t()
        assert all_close(a2, e2, rtol=rtol, atol=atol, equal_nan=equal_nan) == want


def test_all_close_pairs_every_special_value_as_torch_does():
    vals = torch.tensor(SPECIAL, dtype=torch.float64)
    for x in vals:
        for y in vals:
            for equal_nan in (False, True):
                for n in (1, SMALL_CHECK + 1):  # the float path and the numpy path
                    a, e = x.repeat(n), y.repeat(n)
                    assert all_close(a, e, rtol=1e-9, atol=1e-12, equal_nan=equal_nan) == \
                        torch.allclose(a, e, rtol=1e-9, atol=1e-12, equal_nan=equal_nan), (float(x), float(y))


def test_backward_all_accumulates_as_backward_calls_one_after_the_other():
    from judge.testing import backward_all

    x = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([3.0, 1.0], dtype=torch.float64, requires_grad=True)
    outs = [x * 2, x.exp(), torch.outer(y, x)]
    grads = [torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64), torch.ones(3, dtype=torch.float64),
             torch.tensor([[1.0, 2.0, 3.0], [0.0, -1.0, 1.0]], dtype=torch.float64)]
    backward_all(list(zip(outs, grads)))
    got_x, got_y = x.grad.clone(), y.grad.clone()
    x.grad, y.grad = None, None
    for o, g in zip([x * 2, x.exp(), torch.outer(y, x)], grads):
        o.backward(g)
    assert torch.allclose(got_x, x.grad, rtol=1e-15, atol=0) and torch.equal(got_y, y.grad)
    backward_all([])  # nothing to do


def test_backward_sums_is_each_sum_backward_and_skips_what_is_off_the_graph():
    from judge.testing import backward_sums

    x = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([3.0, 1.0], dtype=torch.float64, requires_grad=True)
    z = torch.tensor([2.0], requires_grad=True)
    backward_sums([x.exp(), torch.outer(y, x), z.detach() * 2, 1.5, None])
    assert torch.allclose(x.grad, x.detach().exp() + y.detach().sum(), rtol=1e-15, atol=0)
    assert torch.equal(y.grad, x.detach().sum().expand(2))
    assert z.grad is None  # a detached output: skipped, nothing raised
    backward_sums([])


def test_backward_losses_gives_each_leaf_its_own_gradient_and_names_a_loss_off_the_graph():
    from judge.testing import backward_losses

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0], requires_grad=True)
    backward_losses([(a * a).sum(), (5 * b).sum()], ["a", "b"])
    assert torch.equal(a.grad, torch.tensor([2.0, 4.0])) and torch.equal(b.grad, torch.tensor([5.0]))
    c = torch.ones(2, requires_grad=True)
    with pytest.raises(Feedback, match=r"^case 2: the loss must be a tensor with requires_grad=True"):
        backward_losses([c.sum(), c.sum().detach()], ["case 1", "case 2"])
    assert c.grad is None  # nothing ran: a loss off the graph is refused before any backward
    with pytest.raises(Feedback, match="reaches x"):
        backward_losses([1.0], ["float"], reaches="x")


def test_assert_exactly_zero_refuses_any_nonzero_or_nan_and_names_what():
    from judge.testing import assert_exactly_zero

    assert_exactly_zero(torch.zeros(3), what="g")
    assert_exactly_zero(torch.tensor([-0.0, 0.0]), what="g")  # -0 is 0
    assert_exactly_zero(torch.zeros(0), what="g")  # nothing to check
    for bad in (torch.tensor([0.0, 1e-30]), torch.tensor([float("nan")]), torch.tensor([float("-inf")])):
        with pytest.raises(Feedback, match=r"^gradient at padding must be exactly 0, got "):
            assert_exactly_zero(bad, what="gradient at padding")



def test_check_count_loss_wants_the_references_float64_scalar_and_names_the_count():
    want = torch.tensor(0.25, dtype=torch.float64)
    kw = dict(fn="f", setting="per_token_loss=True", counts=[257, 300])
    check_count_loss(want.clone(), want, mask_dtype=torch.bfloat16, **kw)  # the same value: passes
    with pytest.raises(Feedback, match=r"f\(per_token_loss=True\) with a torch.bfloat16 0/1 mask .*"
                                       r"\[257, 300\] valid tokens per response, 557 in all: counts "
                                       r"torch.bfloat16 cannot hold"):
        check_count_loss(want * 557 / 556, want, mask_dtype=torch.bfloat16, **kw)  # counted as 556
    with pytest.raises(Feedback, match="torch.float32"):
        check_count_loss(want.float(), want, mask_dtype=torch.int32, **kw)  # the mask's dtype leaked in
    with pytest.raises(Feedback) as e:
        check_count_loss(want + 1, want, mask_dtype=torch.uint8, **kw)
    assert "cannot hold" not in str(e.value)  # an integer mask holds every count


def test_without_defaults_leaves_out_exactly_the_entries_at_their_default():
    from judge.testing import without_defaults

    defaults = {"low": 0.5, "high": 2.0, "per_token_loss": False}
    assert without_defaults({"low": 0.5, "high": 3.0, "per_token_loss": True}, defaults) == \
        {"high": 3.0, "per_token_loss": True}
    assert without_defaults({"low": 0.5, "high": 2.0}, defaults) == {}
    assert without_defaults({"mode": "tis", "low": 1}, {"low": 1.0}) == {"mode": "tis"}  # 1 == 1.0
    assert without_defaults({"low": 0.4}, defaults) == {"low": 0.4}
