"""T1: replayed gates and MoE outputs against the scalar-loop oracle, smallest case first.
(Sizes drawn per seed with k = 1, k >= 4, k = E, and one batch of N >= 16384 tokens against the
vectorised reference: test_t2_regimes.py.) The float64 cases of every other size pass
non-contiguous views of their values (column-major x and router_logits, a sliced expert_idx, a
transposed-layout expert_weight). Every other case passes score_function by position (the spec's
signature allows it: a keyword-only score_function raises TypeError there), the others by keyword."""

import torch

from judge.testing import assert_close, batch, check_tensor, sibling, visible

cases = sibling(__file__, "_cases")


def _drawn_cases(ctx, salt):
    """Every T1 size in every dtype, smallest first, each with its routing scale drawn in turn:
    ((N, E, k, D, D_out), dtype, (x, router_logits, expert_idx, expert_weight)); the float64 cases
    of every other size as non-contiguous views of their values (cases.strided: .view raises on them)."""
    g = ctx.generator(salt)
    for i, (n, e, k, d, d_out) in enumerate(cases.T1_SIZES):
        for dtype in cases.DTYPES:
            scale = 0.5 + 3.5 * float(torch.rand((), generator=g))
            case = cases.make_case(g, n, e, k, d, d_out, dtype, scale=scale)
            yield (n, e, k, d, d_out), dtype, (cases.strided(*case) if dtype == torch.float64 and i % 2 else case)


def _gates_vs_oracle(sub, oracle, ctx, salt, sf):
    runs = []
    with batch(sub) as b:  # every case first (the same draws as one case at a time), then checked in order
        for j, ((n, e, k, _, _), dtype, (_, u, idx, _)) in enumerate(_drawn_cases(ctx, salt)):
            pending = b.replay_gates(u, idx, sf) if j % 2 else b.replay_gates(u, idx, score_function=sf)
            runs.append((n, e, k, dtype, u, idx, pending))
    for n, e, k, dtype, u, idx, pending in runs:
        what = f"replay_gates(score_function={sf!r}) on N={n}, E={e}, k={k}, {dtype}"
        got = check_tensor(pending.value, what=what, shape=(n, k), dtype=dtype)
        assert_close(got, oracle.replay_gates(u, idx, score_function=sf), what=what,
                     inputs={"router_logits": u, "expert_idx": idx})


def _forward_vs_oracle(sub, oracle, ctx, salt, sf):
    runs = []
    with batch(sub) as b:  # every case first (the same draws as one case at a time), then checked in order
        for j, ((n, e, k, d, d_out), dtype, (x, u, idx, w)) in enumerate(_drawn_cases(ctx, salt)):
            pending = (b.moe_replay_forward(x, u, idx, w, sf) if j % 2
                       else b.moe_replay_forward(x, u, idx, w, score_function=sf))
            runs.append((n, e, k, d, d_out, dtype, x, u, idx, w, pending))
    for n, e, k, d, d_out, dtype, x, u, idx, w, pending in runs:
        what = f"moe_replay_forward(score_function={sf!r}) on N={n}, E={e}, k={k}, D={d}, D_out={d_out}, {dtype}"
        got = check_tensor(pending.value, what=what, shape=(n, d_out), dtype=dtype)
        assert_close(got, oracle.moe_replay_forward(x, u, idx, w, score_function=sf), what=what,
                     inputs={"x": x, "router_logits": u, "expert_idx": idx, "expert_weight": w})


@visible
def test_gates_softmax_match_oracle(sub, oracle, ctx):
    _gates_vs_oracle(sub, oracle, ctx, 1, "softmax")


def test_gates_sigmoid_match_oracle(sub, oracle, ctx):
    _gates_vs_oracle(sub, oracle, ctx, 2, "sigmoid")


@visible
def test_forward_softmax_matches_oracle(sub, oracle, ctx):
    _forward_vs_oracle(sub, oracle, ctx, 3, "softmax")


def test_forward_sigmoid_matches_oracle(sub, oracle, ctx):
    _forward_vs_oracle(sub, oracle, ctx, 4, "sigmoid")
