"""T2: hand-checked values, gradients (finite differences and closed form), replay invariances,
continuity across a top-k tie, extreme logits, and the k = 1 / k = E endpoints.

Which test covers which class (more in test_t2_regimes.py):
- hand-checked case, finite differences / closed-form router gradient, gradients reaching x and
  only the selected experts: detachment mistakes (gates, outputs). The last also compares the
  router gradient with the closed form in both dtypes, on rows whose selected logits are 120
  (float32) / 800 (float64) apart: a softmax written as 1 / sum_j exp(u_j - u_i) is finite
  there but its backward is inf * 0 = NaN.
- unselected logits do not matter, column order, replaying its own top-k is the standard MoE,
  continuity across a tie: recomputing top-k, sorting the pairing. (The first two compare the
  row blocks of one call: tokens are independent.)
- test_extreme_logits_stay_finite: |u| = 1000 with a tolerance scaled to the logits' magnitude
  (judge.cases.scaled_tolerance), so exp(u - logsumexp(u)) is accepted and the naive exp and
  the all-E softmax are not. (+-25 ... +-700 per dtype: test_t2_regimes.test_logit_regimes.)
- test_k1_and_k_equals_e: Megatron's unnormalised k = 1 sigmoid, the k = E endpoint.
"""

import math

import torch

from judge import cases as shared
from judge.testing import Feedback, assert_close, backward_all, batch, check_tensor, describe, leaf, sibling, visible

cases = sibling(__file__, "_cases")


def _hand_case(dtype):
    u = torch.tensor([[0.0, math.log(3.0), 5.0]], dtype=dtype)
    idx = torch.tensor([[1, 0]])  # expert 2 has the largest logit but was NOT recorded
    x = torch.tensor([[1.0, 2.0]], dtype=dtype)
    w = torch.tensor([[[1.0, 0.0], [0.0, 1.0]],   # E_0(x) = [1, 2]
                      [[0.0, 1.0], [1.0, 0.0]],   # E_1(x) = [2, 1]
                      [[5.0, 5.0], [5.0, 5.0]]], dtype=dtype)
    return x, u, idx, w


@visible
def test_hand_checked_case(sub, ctx):
    # u = [0, log 3, 5], recorded experts [1, 0]: softmax gates [3/4, 1/4]; sigmoid gates
    # [0.75, 0.5] / 1.25 = [0.6, 0.4]. With E_1(x) = [2, 1], E_0(x) = [1, 2]: y = [1.75, 1.25]
    # (softmax), and d(y_0)/du = [g_0 (1 - 1.75), g_1 (2 - 1.75), 0] = [-0.1875, 0.1875, 0].
    runs = []
    with batch(sub) as b:
        for dtype in cases.DTYPES:
            x, u, idx, w = _hand_case(dtype)
            gates = [b.replay_gates(u, idx, score_function=sf) for sf in ("softmax", "sigmoid")]
            ul = leaf(u)
            runs.append((dtype, x, u, idx, w, gates, ul, b.moe_replay_forward(x, ul, idx, w)))
    ys = [pending.value for *_, pending in runs]
    backward_all([(cases.on_graph(y, "moe_replay_forward (hand-checked case)"),
                   torch.tensor([[1.0, 0.0]], dtype=run[0])) for y, run in zip(ys, runs)
                  if isinstance(y, torch.Tensor) and tuple(y.shape) == (1, 2)])  # others fail below
    for (dtype, x, u, idx, w, gates, ul, pending), y in zip(runs, ys):
        inputs = {"router_logits": u, "expert_idx": idx}
        for (sf, want), gate in zip((("softmax", [[0.75, 0.25]]), ("sigmoid", [[0.6, 0.4]])), gates):
            got = check_tensor(gate.value, what=f"replay_gates({sf})",
                               shape=(1, 2), dtype=dtype)
            assert_close(got, torch.tensor(want, dtype=torch.float64), what=f"replay_gates({sf}) hand-checked",
                         inputs=inputs)
        assert_close(y, torch.tensor([[1.75, 1.25]], dtype=torch.float64), what="moe_replay_forward hand-checked",
                     inputs={"x": x, **inputs, "expert_weight": w})
        if ul.grad is None:
            raise Feedback("moe_replay_forward (hand-checked case): router_logits received no gradient (None)")
        assert_close(ul.grad, torch.tensor([[-0.1875, 0.1875, 0.0]], dtype=torch.float64),
                     what="d y[0] / d router_logits (hand-checked; the unrecorded expert 2 gets 0)",
                     inputs={"x": x, **inputs, "expert_weight": w})


@visible
def test_finite_differences_match_closed_form(sub, ctx):
    # Rows are independent, so bumping the c-th recorded logit of EVERY row at once gives each
    # row's derivative with respect to its c-th selected logit; and every bumped copy of the
    # batch goes in the same call as the unbumped rows autograd is checked on, a block each:
    # [u (a leaf), u + bump_0, u - bump_0, ..., u - bump_{k-1}].
    n, e, k, d, d_out, h = 6, 5, 3, 3, 2, 1e-6
    runs = []
    with batch(sub) as b:
        for salt, sf in enumerate(cases.SCORE_FUNCTIONS):
            x, u, idx, w = cases.make_case(ctx.generator(10 + salt), n, e, k, d, d_out, torch.float64)
            bumps = [torch.zeros_like(u).scatter_(1, idx[:, c:c + 1], h) for c in range(k)]
            ul = leaf(u)
            stacked = torch.cat([ul] + [u + sign * bump for bump in bumps for sign in (1, -1)])
            blocks = 1 + 2 * k
            runs.append((salt, sf, x, u, idx, w, ul,
                         b.moe_replay_forward(x.repeat(blocks, 1), stacked, idx.repeat(blocks, 1), w, score_function=sf)))
    outs = [check_tensor(pending.value, what=f"moe_replay_forward({sf}) on {(1 + 2 * k) * n} rows",
                         shape=((1 + 2 * k) * n, d_out)) for salt, sf, x, u, idx, w, ul, pending in runs]
    # autograd through the submission, the first block's rows (one backward pass for both score functions)
    probes = [torch.randn(n, d_out, generator=ctx.generator(20 + salt), dtype=torch.float64) for salt, *_ in runs]
    backward_all([(cases.on_graph(out, f"moe_replay_forward({run[1]})"),
                   torch.cat([probe, torch.zeros(2 * k * n, d_out, dtype=torch.float64)]))
                  for out, probe, run in zip(outs, probes, runs)])
    for (salt, sf, x, u, idx, w, ul, pending), out, probe in zip(runs, outs, probes):
        closed = cases.dy_du64(x, u, idx, w, sf)  # [N, k, D_out]
        ys = out.detach().double().reshape(1 + 2 * k, n, d_out)
        for c in range(k):
            fd = (ys[1 + 2 * c] - ys[2 + 2 * c]) / (2 * h)
            assert_close(fd, closed[:, c], rtol=1e-6, atol=1e-8,
                         what=f"finite-difference dy/du at the recorded expert in column {c} ({sf}); expected "
                              f"g_j (E_j(x) - y)" + (" (1 - sigmoid(u_j))" if sf == "sigmoid" else ""),
                         inputs={"x": x, "router_logits": u, "expert_idx": idx, "expert_weight": w})
        # autograd through the submission agrees with the same closed form
        if ul.grad is None:
            raise Feedback(f"moe_replay_forward({sf}): router_logits received no gradient (None)")
        want = torch.zeros(n, e, dtype=torch.float64).scatter_(1, idx, torch.einsum("nko,no->nk", closed, probe))
        assert_close(ul.grad, want, rtol=1e-9, atol=1e-12,
                     what=f"autograd d(sum(y * probe))/d router_logits ({sf}); 0 at unrecorded experts",
                     inputs={"router_logits": u, "expert_idx": idx})


def test_gradients_reach_x_and_only_selected_experts(sub, ctx):
    n, e, k, d, d_out = 7, 6, 2, 3, 4
    g = ctx.generator(30)
    runs = []
    with batch(sub) as b:
        for dtype in cases.DTYPES:
            x, u, _, w = cases.make_case(g, n, e, k, d, d_out, dtype)
            idx = cases.distinct_idx(g, n, 4, k)  # experts 4 and 5 are never recorded
            # rows 0 and 1: selected logits +-SPREAD apart, past exp's overflow in the dtype (a
            # forward that is finite there, 1 / sum_j exp(u_j - u_i), can still have a NaN backward)
            m = cases.GRAD_SPREAD[dtype] / 2
            u[0, idx[0]] = torch.tensor([m, -m], dtype=dtype)
            u[1, idx[1]] = torch.tensor([-m, m], dtype=dtype)
            probe = torch.randn(n, d_out, generator=g, dtype=torch.float64).to(dtype)
            for sf in cases.SCORE_FUNCTIONS:
                us = u if sf == "softmax" else u.clamp(-30, 30)  # sigmoid gates: |u| <= 30 (spec)
                xl, ul, wl = leaf(x), leaf(us), leaf(w)
                runs.append((dtype, x, us, w, idx, probe, sf, xl, ul, wl,
                             b.moe_replay_forward(xl, ul, idx, wl, score_function=sf)))
    outs = [cases.on_graph(pending.value, f"moe_replay_forward({sf}, {dtype})")
            for dtype, x, u, w, idx, probe, sf, xl, ul, wl, pending in runs]
    backward_all([(y, run[5]) for y, run in zip(outs, runs)])  # each run's leaves are its own
    for dtype, x, u, w, idx, probe, sf, xl, ul, wl, pending in runs:
        gates = cases.gates64(u, idx, sf)  # [N, k]
        p = probe.double()
        want_x = torch.einsum("nk,nkdo,no->nd", gates, w.double()[idx], p)
        want_w = torch.zeros(e, d, d_out, dtype=torch.float64)
        want_w.index_add_(0, idx.reshape(-1),
                          torch.einsum("nk,nd,no->nkdo", gates, x.double(), p).reshape(-1, d, d_out))
        inputs = {"x": x, "router_logits": u, "expert_idx": idx}
        for name, t, want in (("x", xl, want_x), ("expert_weight", wl, want_w)):
            if t.grad is None:
                raise Feedback(f"moe_replay_forward({sf}, {dtype}): {name} received no gradient (None); "
                               f"only the expert SELECTION is replayed, the experts still train")
            assert_close(t.grad, want, what=f"d(sum(y * probe))/d {name} ({sf}, {dtype}; unrecorded "
                                            f"experts 4 and 5 get 0)", inputs=inputs)
        sel = torch.zeros(n, e, dtype=torch.bool).scatter_(1, idx, True)
        if ul.grad is None or not bool((ul.grad[sel] != 0).any()):
            raise Feedback(f"moe_replay_forward({sf}, {dtype}): the recorded experts' router logits got no "
                           f"gradient ({describe(ul.grad)}); the gates must stay differentiable")
        assert_close(torch.where(sel, torch.zeros_like(ul.grad), ul.grad), torch.zeros(n, e, dtype=torch.float64),
                     what=f"moe_replay_forward({sf}, {dtype}): gradient at the UNRECORDED experts' router logits "
                          f"(only the selected logits enter the gates)",
                     inputs={"router_logits.grad": ul.grad, "expert_idx": idx})
        want_u = torch.zeros(n, e, dtype=torch.float64).scatter_(
            1, idx, torch.einsum("nko,no->nk", cases.dy_du64(x, u, idx, w, sf), p))
        assert_close(ul.grad, want_u, what=f"d(sum(y * probe))/d router_logits ({sf}, {dtype}; rows 0 and 1 have "
                                           f"selected logits {cases.GRAD_SPREAD[dtype]:g} apart): g_j (E_j(x) - y)"
                                           + (" (1 - sigmoid(u_j))" if sf == "sigmoid" else ""),
                     inputs={"router_logits": u, "expert_idx": idx})


def test_unselected_logits_do_not_matter(sub, ctx):
    # One call per (dtype, score function, function) on the rows [u; u2]: u2 is u with only the
    # UNRECORDED logits raised, so each row's second copy must give what its first one gives.
    n, e, k, d, d_out = 6, 7, 3, 3, 2
    g = ctx.generator(40)
    runs = []
    with batch(sub) as bt:
        for dtype in cases.DTYPES:
            x, u, idx, w = cases.make_case(g, n, e, k, d, d_out, dtype)
            sel = torch.zeros(n, e, dtype=torch.bool).scatter_(1, idx, True)
            # make every unrecorded expert the router's favourite: recomputing top-k would now pick them
            u2 = torch.where(sel, u, u.max() + 5 + 10 * torch.rand(n, e, generator=g, dtype=torch.float64).to(dtype))
            both_u, both_idx, both_x = torch.cat([u, u2]), idx.repeat(2, 1), x.repeat(2, 1)
            for sf in cases.SCORE_FUNCTIONS:
                runs.append((dtype, idx, u2, sf, bt.replay_gates(both_u, both_idx, score_function=sf),
                             bt.moe_replay_forward(both_x, both_u, both_idx, w, score_function=sf)))
    for dtype, idx, u2, sf, gates, forward in runs:
        what = f"replay_gates({sf}, {dtype}) on [router_logits; router_logits with only the unrecorded ones raised]"
        a = check_tensor(gates.value, what=what, shape=(2 * n, k))
        assert_close(a[n:], a[:n], what=f"replay_gates({sf}, {dtype}) after raising only the UNRECORDED logits "
                                        f"(the output must not change)",
                     inputs={"router_logits (changed)": u2, "expert_idx": idx})
        what = f"moe_replay_forward({sf}, {dtype}) on the same rows"
        y = check_tensor(forward.value, what=what, shape=(2 * n, d_out))
        assert_close(y[n:], y[:n], what=f"moe_replay_forward({sf}, {dtype}) after raising only the UNRECORDED "
                                        f"logits (never recompute top-k)",
                     inputs={"router_logits (changed)": u2, "expert_idx": idx})


def test_column_order_of_expert_idx_does_not_matter(sub, ctx):
    # One call per (dtype, score function, function) on the rows [u; u] with the ids [idx; idx_p],
    # idx_p each row's recorded experts in another column order.
    n, e, k, d, d_out = 5, 6, 3, 2, 3
    g = ctx.generator(50)
    runs = []
    with batch(sub) as bt:
        for dtype in cases.DTYPES:
            x, u, idx, w = cases.make_case(g, n, e, k, d, d_out, dtype)
            perm = torch.rand(n, k, generator=g).argsort(dim=-1)
            idx_p = idx.gather(1, perm)
            both_u, both_idx, both_x = u.repeat(2, 1), torch.cat([idx, idx_p]), x.repeat(2, 1)
            for sf in cases.SCORE_FUNCTIONS:
                runs.append((dtype, u, idx, perm, idx_p, sf, bt.replay_gates(both_u, both_idx, score_function=sf),
                             bt.moe_replay_forward(both_x, both_u, both_idx, w, score_function=sf)))
    for dtype, u, idx, perm, idx_p, sf, gates, forward in runs:
        a = check_tensor(gates.value, what=f"replay_gates({sf}, {dtype}) on [expert_idx; permuted expert_idx]",
                         shape=(2 * n, k))
        assert_close(a[n:], a[:n].gather(1, perm), what=f"replay_gates({sf}, {dtype}) with permuted columns: gate "
                                                        f"column c must follow expert expert_idx[:, c]",
                     inputs={"router_logits": u, "expert_idx": idx, "permuted expert_idx": idx_p})
        y = check_tensor(forward.value, what=f"moe_replay_forward({sf}, {dtype}) on the same rows", shape=(2 * n, d_out))
        assert_close(y[n:], y[:n], what=f"moe_replay_forward({sf}, {dtype}) with permuted expert_idx columns",
                     inputs={"expert_idx": idx, "permuted expert_idx": idx_p})


@visible
def test_replaying_own_topk_is_the_standard_moe(sub, ctx):
    n, e, k, d, d_out = 9, 8, 2, 4, 3
    g = ctx.generator(60)
    runs = []
    with batch(sub) as b:
        for dtype in cases.DTYPES:
            x, u, _, w = cases.make_case(g, n, e, k, d, d_out, dtype)
            idx = torch.topk(u, k, dim=-1).indices
            for sf in cases.SCORE_FUNCTIONS:
                runs.append((dtype, x, u, idx, w, sf, b.moe_replay_forward(x, u, idx, w, score_function=sf)))
    for dtype, x, u, idx, w, sf, pending in runs:
        assert_close(pending.value,
                     cases.standard_moe64(x, u, w, k, sf),
                     what=f"moe_replay_forward({sf}, {dtype}) with expert_idx = topk(router_logits) versus an "
                          f"ordinary top-k MoE layer",
                     inputs={"router_logits": u, "expert_idx": idx})


def test_gates_sum_to_one(sub, ctx):
    g = ctx.generator(70)
    runs = []
    with batch(sub) as b:
        for dtype in cases.DTYPES:
            for n, e, k in [(8, 8, 2), (5, 16, 6), (4, 3, 3)]:
                _, u, idx, _ = cases.make_case(g, n, e, k, 1, 1, dtype, scale=6.0)
                for sf in cases.SCORE_FUNCTIONS:
                    runs.append((dtype, n, u, idx, sf, b.replay_gates(u, idx, score_function=sf)))
    for dtype, n, u, idx, sf, pending in runs:
        gates = pending.value
        assert_close(gates.sum(dim=-1), torch.ones(n, dtype=torch.float64),
                     what=f"row sums of replay_gates({sf}, {dtype}) (the gates of the k recorded "
                          f"experts are normalised over those k)",
                     inputs={"router_logits": u, "expert_idx": idx})
        if not bool(((gates > 0) & (gates <= 1)).all()):
            raise Feedback(f"replay_gates({sf}, {dtype}) must lie in (0, 1], got {describe(gates)}")


def test_replay_is_continuous_across_a_topk_tie(sub, ctx):
    # Experts 1 and 2 tie for second place at delta = 0. The sampler recorded {0, 1}. Recomputing
    # top-k swaps expert 1 for expert 2 as delta crosses 0 (a jump of order one); replay moves by O(delta).
    g = ctx.generator(80)
    d, d_out, eps = 3, 3, 1e-5
    runs = []
    with batch(sub) as b:
        for dtype in cases.DTYPES:
            w = (torch.randn(4, d, d_out, generator=g, dtype=torch.float64) / math.sqrt(d)).to(dtype)
            w[2] = w[1] + 1.0  # expert 2 computes something clearly different from expert 1
            x = torch.ones(3, d, dtype=dtype)
            deltas = torch.tensor([-eps, 0.0, eps], dtype=torch.float64)
            u = torch.stack([torch.tensor([2.0, 0.5 + t, 0.5 - t, -1.0], dtype=torch.float64)
                             for t in deltas]).to(dtype)
            idx = torch.tensor([[0, 1]] * 3)
            for sf in cases.SCORE_FUNCTIONS:
                runs.append((dtype, x, u, idx, w, sf, b.moe_replay_forward(x, u, idx, w, score_function=sf)))
    for dtype, x, u, idx, w, sf, pending in runs:
        y = pending.value.detach().double()
        recompute = cases.standard_moe64(x, u, w, 2, sf)
        jump = float((recompute[0] - recompute[2]).abs().max())
        assert jump > 0.1  # the test's own recomputed route does jump
        assert_close(y[0], y[1], rtol=0, atol=1e-3,
                     what=f"moe_replay_forward({sf}, {dtype}) at delta=-1e-5 versus delta=0 across a top-k tie "
                          f"(replay must be continuous; recomputing top-k would jump by {jump:.3g})",
                     inputs={"router_logits": u, "expert_idx": idx})
        assert_close(y[2], y[1], rtol=0, atol=1e-3,
                     what=f"moe_replay_forward({sf}, {dtype}) at delta=+1e-5 versus delta=0 across a top-k tie "
                          f"(replay must be continuous; recomputing top-k would jump by {jump:.3g})",
                     inputs={"router_logits": u, "expert_idx": idx})


def test_extreme_logits_stay_finite(sub, oracle, ctx):
    # softmax over the recorded logits must subtract their max: exp(1000) overflows and exp(-1000)
    # underflows. Row 2's recorded experts are tiny next to an unrecorded logit of 1000, which
    # breaks "softmax over all E, gather, renormalise" (every gathered probability underflows to 0).
    u64 = torch.tensor([[1000.0, 999.0, 0.0, -5.0],
                        [-1000.0, 3.0, -1001.0, 0.0],
                        [0.0, 1000.0, -1.0, 20.0],
                        [-30.0, -31.0, 500.0, 90.0]], dtype=torch.float64)
    idx = torch.tensor([[0, 1], [0, 2], [0, 2], [1, 0]])
    x = torch.tensor([[1.0, -1.0]] * 4, dtype=torch.float64)
    w = torch.randn(4, 2, 2, generator=ctx.generator(90), dtype=torch.float64)
    js = torch.tensor([[0, 1], [0, 1]])
    runs = []
    with batch(sub) as b:
        for dtype in cases.DTYPES:
            u = u64.to(dtype)
            # sigmoid: within |u| <= 30 nothing underflows; the normalisation must still be exact
            us = torch.tensor([[30.0, 29.0, -3.0], [-30.0, -31.0, 0.0]], dtype=dtype)
            runs.append((dtype, u, us, b.replay_gates(u, idx, score_function="softmax"),
                         b.moe_replay_forward(x.to(dtype), u, idx, w.to(dtype), score_function="softmax"),
                         b.replay_gates(us, js, score_function="sigmoid")))
    for dtype, u, us, gates, forward, sigmoid_gates in runs:
        # A stable softmax inherits the rounding of its logits: |u| = 1000 is known to ~eps * 1000
        # in the tensor's dtype (6e-5 in float32), so exp(u - max) and exp(u - logsumexp(u)) both
        # carry that relative error. The tolerance scales with the magnitude (judge.cases).
        rtol, atol = shared.scaled_tolerance(dtype, float(u.abs().max()))
        want = oracle.replay_gates(u, idx, score_function="softmax")  # each row [sigmoid(1), 1 - sigmoid(1)]
        got = gates.value
        assert_close(got, want, what=f"replay_gates(softmax, {dtype}) with logits of magnitude 1000",
                     rtol=rtol, atol=atol, inputs={"router_logits": u, "expert_idx": idx})
        y = forward.value
        assert_close(y, oracle.moe_replay_forward(x, u, idx, w, score_function="softmax"),
                     what=f"moe_replay_forward(softmax, {dtype}) with logits of magnitude 1000",
                     rtol=rtol, atol=atol, inputs={"router_logits": u, "expert_idx": idx})
        assert_close(sigmoid_gates.value,
                     oracle.replay_gates(us, js, score_function="sigmoid"),
                     what=f"replay_gates(sigmoid, {dtype}) with saturated logits",
                     inputs={"router_logits": us, "expert_idx": js})


@visible
def test_k1_and_k_equals_e(sub, ctx):
    n, e, d, d_out = 5, 4, 3, 2
    g = ctx.generator(100)
    runs = []
    with batch(sub) as b:
        for dtype in cases.DTYPES:
            x, u, idx1, w = cases.make_case(g, n, e, 1, d, d_out, dtype)
            k1 = [(sf, b.replay_gates(u, idx1, score_function=sf),
                   b.moe_replay_forward(x, u, idx1, w, score_function=sf)) for sf in cases.SCORE_FUNCTIONS]
            idx_all = cases.distinct_idx(g, n, e, e)
            runs.append((dtype, x, u, idx1, w, k1, idx_all, b.replay_gates(u, idx_all, score_function="softmax")))
    for dtype, x, u, idx1, w, k1, idx_all, full in runs:
        for sf, gates, forward in k1:
            assert_close(gates.value, torch.ones(n, 1, dtype=torch.float64),
                         what=f"replay_gates({sf}, {dtype}) with k=1: a lone expert's gate is exactly 1 "
                              f"(this exercise normalises sigmoid gates for every k)",
                         inputs={"router_logits": u, "expert_idx": idx1})
            assert_close(forward.value,
                         torch.einsum("nd,ndo->no", x.double(), w.double()[idx1[:, 0]]),
                         what=f"moe_replay_forward({sf}, {dtype}) with k=1 (y = x W_e)",
                         inputs={"x": x, "expert_idx": idx1})
        assert_close(full.value,
                     torch.softmax(u.double(), dim=-1).gather(1, idx_all),
                     what=f"replay_gates(softmax, {dtype}) with k=E: the full softmax, in expert_idx's column order",
                     inputs={"router_logits": u, "expert_idx": idx_all})
