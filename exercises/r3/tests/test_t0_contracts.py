"""T0: shapes, dtypes, plain tensors on the autograd graph, untouched inputs, and ValueErrors."""

import torch

from judge.testing import Feedback, assert_close, check_tensor, describe, expect_raises, sibling, visible

cases = sibling(__file__, "_cases")


def _valid(ctx, salt, n=3, e=5, k=2, d=4, d_out=3, dtype=torch.float64):
    return cases.make_case(ctx.generator(salt), n, e, k, d, d_out, dtype)


@visible
def test_gates_shape_and_dtype(sub, ctx):
    g = ctx.generator(1)
    for dtype in cases.DTYPES:
        for n, e, k in [(3, 5, 2), (4, 4, 1), (2, 3, 3), (6, 2, 2)]:  # N != E, k = 1, k = E
            u = torch.randn(n, e, generator=g, dtype=torch.float64).to(dtype)
            idx = cases.distinct_idx(g, n, e, k)
            for sf in cases.SCORE_FUNCTIONS:
                out = sub.replay_gates(u, idx, score_function=sf)
                check_tensor(out, what=f"replay_gates(router_logits [{n}, {e}] {dtype}, expert_idx [{n}, {k}], "
                                       f"score_function={sf!r})", shape=(n, k), dtype=dtype)


@visible
def test_forward_shape_and_dtype(sub, ctx):
    for dtype in cases.DTYPES:
        for salt, (n, e, k, d, d_out) in enumerate([(3, 5, 2, 4, 3), (5, 2, 1, 2, 6), (2, 4, 4, 3, 1)]):
            x, u, idx, w = _valid(ctx, 10 + salt, n, e, k, d, d_out, dtype)
            for sf in cases.SCORE_FUNCTIONS:
                out = sub.moe_replay_forward(x, u, idx, w, score_function=sf)
                check_tensor(out, what=f"moe_replay_forward(x [{n}, {d}], router_logits [{n}, {e}], "
                                       f"expert_idx [{n}, {k}], expert_weight [{e}, {d}, {d_out}], {dtype}, "
                                       f"score_function={sf!r})", shape=(n, d_out), dtype=dtype)


def test_default_score_function_is_softmax(sub, ctx):
    x, u, idx, w = _valid(ctx, 20)
    assert_close(sub.replay_gates(u, idx), sub.replay_gates(u, idx, score_function="softmax"),
                 what="replay_gates without score_function (the default is 'softmax')",
                 inputs={"router_logits": u, "expert_idx": idx})
    assert_close(sub.moe_replay_forward(x, u, idx, w), sub.moe_replay_forward(x, u, idx, w, score_function="softmax"),
                 what="moe_replay_forward without score_function (the default is 'softmax')")


def test_int32_indices_accepted(sub, ctx):
    # slime's replay buffer hands the trainer int32 expert ids: same result as with int64 ids.
    x, u, idx, w = _valid(ctx, 30)
    idx32 = idx.to(torch.int32)
    for sf in cases.SCORE_FUNCTIONS:
        what = f"replay_gates with int32 expert_idx ({sf}) versus the same ids as int64"
        got = check_tensor(sub.replay_gates(u, idx32, score_function=sf), what=what, shape=tuple(idx.shape))
        assert_close(got, sub.replay_gates(u, idx, score_function=sf), what=what,
                     inputs={"router_logits": u, "expert_idx": idx32})
        what = f"moe_replay_forward with int32 expert_idx ({sf}) versus the same ids as int64"
        got = check_tensor(sub.moe_replay_forward(x, u, idx32, w, score_function=sf), what=what, shape=(3, 3))
        assert_close(got, sub.moe_replay_forward(x, u, idx, w, score_function=sf), what=what)


@visible
def test_outputs_stay_on_the_router_graph(sub, ctx):
    # Replay fixes WHICH experts run, not their gates: the output must stay a function of the
    # router logits (R3 replays expert ids, never recorded gate values or detached outputs).
    x, u, idx, w = _valid(ctx, 40)
    for sf in cases.SCORE_FUNCTIONS:
        ul = u.clone().requires_grad_(True)
        gates = sub.replay_gates(ul, idx, score_function=sf)
        if not gates.requires_grad:
            raise Feedback(f"replay_gates(router_logits.requires_grad=True, score_function={sf!r}) returned a "
                           f"tensor with requires_grad=False: the gates were detached from the router logits "
                           f"(recompute them from router_logits with differentiable ops; only the expert ids "
                           f"are replayed)")
        ul = u.clone().requires_grad_(True)
        y = sub.moe_replay_forward(x, ul, idx, w, score_function=sf)
        if not y.requires_grad:
            raise Feedback(f"moe_replay_forward with only router_logits requiring grad (score_function={sf!r}) "
                           f"returned requires_grad=False: the output does not depend differentiably on the "
                           f"router logits, so the router would never learn (were the gates detached?)")


def test_inputs_not_mutated(sub, ctx):
    x, u, idx, w = _valid(ctx, 50, n=4, e=6, k=3, d=3, d_out=2)
    before = [t.clone() for t in (x, u, idx, w)]
    for sf in cases.SCORE_FUNCTIONS:
        sub.replay_gates(u, idx, score_function=sf)
        sub.moe_replay_forward(x, u, idx, w, score_function=sf)
    for name, old, new in zip(("x", "router_logits", "expert_idx", "expert_weight"), before, (x, u, idx, w)):
        if not torch.equal(old, new):
            raise Feedback(f"{name} was modified in place: before {describe(old)}, after {describe(new)} "
                           f"(never write into the inputs)")


def _both_raise(sub, what, u, idx, x=None, w=None, score_function="softmax"):
    expect_raises(ValueError, sub.replay_gates, u, idx, score_function=score_function,
                  what=f"replay_gates with {what}")
    if x is not None:
        expect_raises(ValueError, sub.moe_replay_forward, x, u, idx, w, score_function=score_function,
                      what=f"moe_replay_forward with {what}")


@visible
def test_rejects_non_integer_indices(sub, ctx):
    x, u, idx, w = _valid(ctx, 60)
    _both_raise(sub, f"a float expert_idx {describe(idx.double())} (ids must be an integer tensor)",
                u, idx.double(), x, w)
    _both_raise(sub, f"a float32 expert_idx {describe(idx.float())} (ids must be an integer tensor)",
                u, idx.float(), x, w)
    b = torch.tensor([[True, False], [False, True], [True, True]])
    _both_raise(sub, f"a bool expert_idx {describe(b)} (a mask is not a list of expert ids)", u, b, x, w)


@visible
def test_rejects_out_of_range_indices(sub, ctx):
    x, u, idx, w = _valid(ctx, 70)  # E = 5
    for bad in (5, -1, 7):
        j = idx.clone()
        j[1, 1] = bad
        _both_raise(sub, f"expert_idx {describe(j)} for E=5 (ids must lie in [0, E))", u, j, x, w)


@visible
def test_rejects_duplicate_experts(sub, ctx):
    x, u, _, w = _valid(ctx, 80, n=3, e=5, k=3)
    adjacent = torch.tensor([[0, 1, 2], [3, 3, 1], [4, 2, 0]])
    apart = torch.tensor([[0, 1, 2], [2, 4, 1], [4, 0, 4]])  # the repeat is not adjacent
    for j in (adjacent, apart):
        _both_raise(sub, f"expert_idx {describe(j)} (row 1 or 2 repeats an expert)", u, j, x, w)


def test_rejects_shape_mismatch(sub, ctx):
    x, u, idx, w = _valid(ctx, 90)  # N=3, E=5, k=2, D=4, D_out=3
    _both_raise(sub, "expert_idx of shape (4, 2) but router_logits of shape (3, 5)",
                u, torch.cat([idx, idx[:1]]), x, w)
    _both_raise(sub, "1-D router_logits of shape (5,)", u[0], idx[:1], x[:1], w)
    _both_raise(sub, "1-D expert_idx of shape (2,)", u[:1], idx[0], x[:1], w)
    _both_raise(sub, "expert_idx of shape (3, 0) (k must be at least 1)",
                u, torch.zeros(3, 0, dtype=torch.int64), x, w)
    _both_raise(sub, "3-D router_logits of shape (1, 3, 5)", u.unsqueeze(0), idx, x, w)
    for what, xx, ww in [
        ("x of shape (2, 4) but router_logits of shape (3, 5)", x[:2], w),
        ("1-D x", x[0], w),
        ("expert_weight of shape (4, 4, 3) for E=5", x, w[:4]),
        ("expert_weight of shape (5, 3, 3) for D=4", x, w[:, :3]),
        ("2-D expert_weight of shape (5, 4)", x, w[:, :, 0]),
    ]:
        expect_raises(ValueError, sub.moe_replay_forward, xx, u, idx, ww, what=f"moe_replay_forward with {what}")


@visible
def test_rejects_unknown_score_function(sub, ctx):
    x, u, idx, w = _valid(ctx, 100)
    for sf in ("tanh", "sparsemax", ""):
        _both_raise(sub, f"score_function={sf!r} (only 'softmax' and 'sigmoid' exist)", u, idx, x, w,
                    score_function=sf)
