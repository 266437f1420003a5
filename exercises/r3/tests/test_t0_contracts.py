"""T0: shapes, dtypes, plain tensors on the autograd graph, untouched inputs, and ValueErrors.

Which test covers which class (issue 17; the regimes are in test_t2_regimes.py):
- test_gates_shape_and_dtype / test_forward_shape_and_dtype: N != E, k = 1, k = E, both dtypes.
- test_default_score_function_is_softmax: the default omitted.
- test_int32_indices_accepted: slime's int32 ids give the result of their values (as int64).
- test_outputs_stay_on_the_router_graph: gates and output differentiable in the router logits.
- test_inputs_not_mutated: no in-place writes (the judge also checks every call).
- test_rejects_*: every ValueError rule with softmax (under sigmoid too, with int32 ids, k = 0,
  k > E: test_t2_regimes.test_validation_under_every_score_function; N = 0 is legal:
  test_t2_regimes.test_empty_token_batch).
"""

import torch

from judge.testing import Feedback, assert_close, batch, check_tensor, describe, expect_raises, sibling, visible

cases = sibling(__file__, "_cases")


def _valid(ctx, salt, n=3, e=5, k=2, d=4, d_out=3, dtype=torch.float64):
    return cases.make_case(ctx.generator(salt), n, e, k, d, d_out, dtype)


@visible
def test_gates_shape_and_dtype(sub, ctx):
    g = ctx.generator(1)
    runs = []
    with batch(sub) as b:
        for dtype in cases.DTYPES:
            for n, e, k in [(3, 5, 2), (4, 4, 1), (2, 3, 3), (6, 2, 2)]:  # N != E, k = 1, k = E
                u = torch.randn(n, e, generator=g, dtype=torch.float64).to(dtype)
                idx = cases.distinct_idx(g, n, e, k)
                for sf in cases.SCORE_FUNCTIONS:
                    runs.append((dtype, n, e, k, sf, b.replay_gates(u, idx, score_function=sf)))
    for dtype, n, e, k, sf, pending in runs:
        out = pending.value
        check_tensor(out, what=f"replay_gates(router_logits [{n}, {e}] {dtype}, expert_idx [{n}, {k}], "
                               f"score_function={sf!r})", shape=(n, k), dtype=dtype)


@visible
def test_forward_shape_and_dtype(sub, ctx):
    runs = []
    with batch(sub) as b:
        for dtype in cases.DTYPES:
            for salt, (n, e, k, d, d_out) in enumerate([(3, 5, 2, 4, 3), (5, 2, 1, 2, 6), (2, 4, 4, 3, 1)]):
                x, u, idx, w = _valid(ctx, 10 + salt, n, e, k, d, d_out, dtype)
                for sf in cases.SCORE_FUNCTIONS:
                    pending = b.moe_replay_forward(x, u, idx, w, score_function=sf)
                    runs.append((dtype, n, e, k, d, d_out, sf, pending))
    for dtype, n, e, k, d, d_out, sf, pending in runs:
        out = pending.value
        check_tensor(out, what=f"moe_replay_forward(x [{n}, {d}], router_logits [{n}, {e}], "
                               f"expert_idx [{n}, {k}], expert_weight [{e}, {d}, {d_out}], {dtype}, "
                               f"score_function={sf!r})", shape=(n, d_out), dtype=dtype)


def test_default_score_function_is_softmax(sub, ctx):
    # without score_function: the softmax gates and output (the trusted float64 formulas)
    x, u, idx, w = _valid(ctx, 20)
    with batch(sub) as b:
        gates, forward = b.replay_gates(u, idx), b.moe_replay_forward(x, u, idx, w)
    assert_close(gates.value, cases.gates64(u, idx, "softmax"),
                 what="replay_gates without score_function (the default is 'softmax')",
                 inputs={"router_logits": u, "expert_idx": idx})
    assert_close(forward.value, cases.forward64(x, u, idx, w, "softmax"),
                 what="moe_replay_forward without score_function (the default is 'softmax')")


def test_int32_indices_accepted(sub, ctx):
    # slime's replay buffer hands the trainer int32 expert ids: the same gates and output as the
    # ids' values give (the trusted float64 formulas; int64 ids are what every other test sends).
    x, u, idx, w = _valid(ctx, 30)
    idx32 = idx.to(torch.int32)
    with batch(sub) as b:
        runs = [(sf, b.replay_gates(u, idx32, score_function=sf),
                 b.moe_replay_forward(x, u, idx32, w, score_function=sf)) for sf in cases.SCORE_FUNCTIONS]
    for sf, gates32, forward32 in runs:
        what = f"replay_gates with int32 expert_idx ({sf})"
        got = check_tensor(gates32.value, what=what, shape=tuple(idx.shape))
        assert_close(got, cases.gates64(u, idx, sf), what=what + " versus the same ids as int64",
                     inputs={"router_logits": u, "expert_idx": idx32})
        what = f"moe_replay_forward with int32 expert_idx ({sf})"
        got = check_tensor(forward32.value, what=what, shape=(3, 3))
        assert_close(got, cases.forward64(x, u, idx, w, sf), what=what + " versus the same ids as int64")


@visible
def test_outputs_stay_on_the_router_graph(sub, ctx):
    # Replay fixes WHICH experts run, not their gates: the output must stay a function of the
    # router logits (R3 replays expert ids, never recorded gate values or detached outputs).
    x, u, idx, w = _valid(ctx, 40)
    runs = []
    with batch(sub) as b:
        for sf in cases.SCORE_FUNCTIONS:
            ul = u.clone().requires_grad_(True)
            gates = b.replay_gates(ul, idx, score_function=sf)
            ul = u.clone().requires_grad_(True)
            runs.append((sf, gates, b.moe_replay_forward(x, ul, idx, w, score_function=sf)))
    for sf, gates, y in runs:
        if not gates.value.requires_grad:
            raise Feedback(f"replay_gates(router_logits.requires_grad=True, score_function={sf!r}) returned a "
                           f"tensor with requires_grad=False: the gates were detached from the router logits "
                           f"(recompute them from router_logits with differentiable ops; only the expert ids "
                           f"are replayed)")
        if not y.value.requires_grad:
            raise Feedback(f"moe_replay_forward with only router_logits requiring grad (score_function={sf!r}) "
                           f"returned requires_grad=False: the output does not depend differentiably on the "
                           f"router logits, so the router would never learn (were the gates detached?)")


def test_inputs_not_mutated(sub, ctx):
    x, u, idx, w = _valid(ctx, 50, n=4, e=6, k=3, d=3, d_out=2)
    before = [t.clone() for t in (x, u, idx, w)]
    with batch(sub) as b:
        calls = [c for sf in cases.SCORE_FUNCTIONS
                 for c in (b.replay_gates(u, idx, score_function=sf),
                           b.moe_replay_forward(x, u, idx, w, score_function=sf))]
    for pending in calls:
        pending.value  # raises what the call raised, or names the input it wrote into (judge.readonly)
    for name, old, new in zip(("x", "router_logits", "expert_idx", "expert_weight"), before, (x, u, idx, w)):
        if not torch.equal(old, new):
            raise Feedback(f"{name} was modified in place: before {describe(old)}, after {describe(new)} "
                           f"(never write into the inputs)")


def _queue_both(b, u, idx, x=None, w=None, score_function="softmax"):
    """Queue replay_gates (and moe_replay_forward when x is given) in the batch ``b``."""
    gates = b.replay_gates(u, idx, score_function=score_function)
    return gates, (b.moe_replay_forward(x, u, idx, w, score_function=score_function) if x is not None else None)


def _check_both_raise(what, queued):
    """Both calls queued by ``_queue_both`` must have raised ValueError."""
    gates, forward = queued
    expect_raises(ValueError, gates.get, what=f"replay_gates with {what}")
    if forward is not None:
        expect_raises(ValueError, forward.get, what=f"moe_replay_forward with {what}")


@visible
def test_rejects_non_integer_indices(sub, ctx):
    x, u, idx, w = _valid(ctx, 60)
    mask = torch.tensor([[True, False], [False, True], [True, True]])
    bad = [(f"a float expert_idx {describe(idx.double())} (ids must be an integer tensor)", idx.double()),
           (f"a float32 expert_idx {describe(idx.float())} (ids must be an integer tensor)", idx.float()),
           (f"a bool expert_idx {describe(mask)} (a mask is not a list of expert ids)", mask)]
    with batch(sub) as b:
        queued = [_queue_both(b, u, j, x, w) for _, j in bad]
    for (what, _), q in zip(bad, queued):
        _check_both_raise(what, q)


@visible
def test_rejects_out_of_range_indices(sub, ctx):
    x, u, idx, w = _valid(ctx, 70)  # E = 5
    runs = []
    with batch(sub) as b:
        for bad in (5, -1, 7):
            j = idx.clone()
            j[1, 1] = bad
            runs.append((j, _queue_both(b, u, j, x, w)))
    for j, queued in runs:
        _check_both_raise(f"expert_idx {describe(j)} for E=5 (ids must lie in [0, E))", queued)


@visible
def test_rejects_duplicate_experts(sub, ctx):
    x, u, _, w = _valid(ctx, 80, n=3, e=5, k=3)
    adjacent = torch.tensor([[0, 1, 2], [3, 3, 1], [4, 2, 0]])
    apart = torch.tensor([[0, 1, 2], [2, 4, 1], [4, 0, 4]])  # the repeat is not adjacent
    with batch(sub) as b:
        runs = [(j, _queue_both(b, u, j, x, w)) for j in (adjacent, apart)]
    for j, queued in runs:
        _check_both_raise(f"expert_idx {describe(j)} (row 1 or 2 repeats an expert)", queued)


def test_rejects_shape_mismatch(sub, ctx):
    x, u, idx, w = _valid(ctx, 90)  # N=3, E=5, k=2, D=4, D_out=3
    both = [
        ("expert_idx of shape (4, 2) but router_logits of shape (3, 5)", u, torch.cat([idx, idx[:1]]), x, w),
        ("1-D router_logits of shape (5,)", u[0], idx[:1], x[:1], w),
        ("1-D expert_idx of shape (2,)", u[:1], idx[0], x[:1], w),
        ("expert_idx of shape (3, 0) (k must be at least 1)", u, torch.zeros(3, 0, dtype=torch.int64), x, w),
        ("3-D router_logits of shape (1, 3, 5)", u.unsqueeze(0), idx, x, w),
    ]
    forward_only = [
        ("x of shape (2, 4) but router_logits of shape (3, 5)", x[:2], w),
        ("1-D x", x[0], w),
        ("expert_weight of shape (4, 4, 3) for E=5", x, w[:4]),
        # more experts than router_logits has: ids < E index it fine, so a check of
        # shape[0] >= E (or none) lets it through; the spec asks for exactly [E, D, D_out]
        ("expert_weight of shape (6, 4, 3) for E=5", x, torch.cat([w, w[:1]])),
        ("expert_weight of shape (5, 3, 3) for D=4", x, w[:, :3]),
        ("2-D expert_weight of shape (5, 4)", x, w[:, :, 0]),
    ]
    with batch(sub) as b:
        queued = [_queue_both(b, uu, jj, xx, ww) for _, uu, jj, xx, ww in both]
        forwards = [b.moe_replay_forward(xx, u, idx, ww) for _, xx, ww in forward_only]
    for (what, *_), q in zip(both, queued):
        _check_both_raise(what, q)
    for (what, *_), pending in zip(forward_only, forwards):
        expect_raises(ValueError, pending.get, what=f"moe_replay_forward with {what}")


@visible
def test_rejects_unknown_score_function(sub, ctx):
    x, u, idx, w = _valid(ctx, 100)
    with batch(sub) as b:
        # "Softmax" / "SIGMOID": the names are exact, not matched case-insensitively (.lower())
        runs = [(sf, _queue_both(b, u, idx, x, w, score_function=sf))
                for sf in ("tanh", "sparsemax", "", "Softmax", "SIGMOID")]
    for sf, queued in runs:
        _check_both_raise(f"score_function={sf!r} (only 'softmax' and 'sigmoid' exist, spelt exactly so)", queued)
