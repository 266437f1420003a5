"""T2: validation under every score function, shapes and regimes the other tiers never generate
(issue 17).

Which test covers which class of mistake:
- test_validation_under_every_score_function: every ValueError rule (non-integer and bool ids,
  out-of-range ids, repeats anywhere in a row, k = 0, k > E, shapes) under "softmax" AND
  "sigmoid", with int64 and int32 ids, in both functions.
- test_empty_token_batch: N = 0 tokens (an empty batch) gives [0, k] gates and a [0, D_out]
  output on the graph, not a crash (min()/max() of an empty tensor raise).
- test_logit_regimes: logits of magnitude 25 / 60 / 85 (float32) and 25 / 100 / 700 (float64),
  selected and unselected, softmax and sigmoid, compared with tolerances scaled to the logits'
  magnitude (every stable formulation passes: exp(u - max), exp(u - logsumexp(u)), softmax of
  logsigmoid).
- test_drawn_shapes_match_oracle / test_large_batch_matches_reference: (N, E, k, D, D_out) drawn
  per seed (k = 1, k >= 4, k = E) against the oracle, values and gradients; one float64 batch of
  N >= 16384 tokens against the vectorised reference (gates and outputs).
"""

import torch

from judge import cases as shared
from judge.testing import assert_close, batch, check_tensor, describe, expect_raises, leaf, sibling

cases = sibling(__file__, "_cases")
F32, F64 = torch.float32, torch.float64


def test_validation_under_every_score_function(sub, ctx):
    x, u, idx, w = cases.make_case(ctx.generator(301), 3, 5, 2, 4, 3)  # N=3, E=5, k=2, D=4, D_out=3
    bad = []
    for id_dtype in (torch.int64, torch.int32):
        j = idx.to(id_dtype)
        out_hi, out_neg = j.clone(), j.clone()
        out_hi[2, 0], out_neg[0, 1] = 5, -1
        rep3 = torch.tensor([[0, 1, 2], [4, 2, 4], [1, 3, 0]], dtype=id_dtype)  # row 1 repeats 4, apart
        name = str(id_dtype).replace("torch.", "")
        bad += [(f"{name} expert_idx with id 5 for E = 5", u, out_hi),
                (f"{name} expert_idx with id -1", u, out_neg),
                (f"{name} expert_idx {describe(rep3)} (row 1 repeats expert 4)", u, rep3),
                (f"{name} expert_idx of shape (3, 0) (k = 0)", u, torch.zeros(3, 0, dtype=id_dtype)),
                (f"{name} expert_idx of shape (3, 6) for E = 5 (k > E)", u,
                 torch.stack([torch.randperm(6, generator=ctx.generator(302))] * 3).to(id_dtype)),
                (f"{name} expert_idx with 2 rows for 3 tokens", u, j[:2])]
    bad += [("a float expert_idx", u, idx.double()), ("a bool expert_idx", u, idx > 1),
            ("1-D router_logits", u[0], idx[:1]),
            ("a 1-D expert_idx of length N = 3", u, idx[:, 0].contiguous()),
            ("a 3-D expert_idx of shape (3, 2, 1)", u, idx[..., None])]
    with batch(sub) as b:
        calls = []
        for sf in cases.SCORE_FUNCTIONS:
            for what, uu, jj in bad:
                calls.append((f"replay_gates(score_function={sf!r}) with {what}",
                              b.replay_gates(uu, jj, score_function=sf)))
                xx = x if uu.dim() == 2 else x[:1]
                calls.append((f"moe_replay_forward(score_function={sf!r}) with {what}",
                              b.moe_replay_forward(xx, uu, jj, w, score_function=sf)))
            calls.append((f"moe_replay_forward(score_function={sf!r}) with expert_weight for E = 4",
                          b.moe_replay_forward(x, u, idx, w[:4], score_function=sf)))
            calls.append((f"moe_replay_forward(score_function={sf!r}) with x of shape (3, 3) for D = 4",
                          b.moe_replay_forward(x[:, :3], u, idx, w, score_function=sf)))
    for what, pending in calls:
        expect_raises(ValueError, pending.get, what=what)


def test_empty_token_batch(sub):
    E, k, D, D_out = 5, 2, 3, 4
    with batch(sub) as b:
        calls = []
        for dtype in cases.DTYPES:
            for id_dtype in (torch.int64, torch.int32):
                u = leaf(torch.zeros(0, E, dtype=dtype))
                idx = torch.zeros(0, k, dtype=id_dtype)
                x = leaf(torch.zeros(0, D, dtype=dtype))
                w = leaf(torch.randn(E, D, D_out, dtype=F64).to(dtype))
                for sf in cases.SCORE_FUNCTIONS:
                    calls.append((dtype, id_dtype, sf, b.replay_gates(u, idx, score_function=sf),
                                  b.moe_replay_forward(x, u, idx, w, score_function=sf)))
    for dtype, id_dtype, sf, gates, y in calls:
        what = f"(score_function={sf!r}, {dtype}, {id_dtype} ids) with N = 0 tokens"
        check_tensor(gates.value, what=f"replay_gates{what}", shape=(0, k), dtype=dtype)
        check_tensor(y.value, what=f"moe_replay_forward{what}", shape=(0, D_out), dtype=dtype)


def test_logit_regimes(sub, oracle, ctx):
    g = ctx.generator(303)
    with batch(sub) as b:
        calls = []
        for dtype in cases.DTYPES:
            for mag in shared.EXTREME_LOG_RATIOS[dtype]:
                n, e, k, d, d_out = 6, 6, 3, 2, 2
                x, _, idx, w = cases.make_case(g, n, e, k, d, d_out, dtype)
                # logits spread over [-mag, mag]: some rows have a selected logit at +-mag next to
                # ordinary ones, some an unselected logit far above the selected ones
                u = (mag * (2 * torch.rand(n, e, generator=g, dtype=F64) - 1)).to(dtype)
                u[0, idx[0, 0]] = mag
                u[1, idx[1, 1]] = -mag
                for sf in cases.SCORE_FUNCTIONS:
                    us = u if sf == "softmax" else u.clamp(-30, 30)  # sigmoid gates: |u| <= 30 (spec)
                    calls.append((dtype, mag, sf, x, us, idx, w, b.replay_gates(us, idx, score_function=sf),
                                  b.moe_replay_forward(x, us, idx, w, score_function=sf)))
    for dtype, mag, sf, x, u, idx, w, gates, y in calls:
        rtol, atol = shared.scaled_tolerance(dtype, float(u.abs().max()))
        what = f"(score_function={sf!r}, {dtype}) with logits up to |u| = {float(u.abs().max()):g}"
        shown = {"router_logits": u, "expert_idx": idx}
        assert_close(gates.value, oracle.replay_gates(u, idx, score_function=sf), what=f"replay_gates{what}",
                     rtol=rtol, atol=atol, inputs=shown)
        assert_close(y.value, oracle.moe_replay_forward(x, u, idx, w, score_function=sf),
                     what=f"moe_replay_forward{what}", rtol=rtol, atol=atol, inputs=shown)


def _drawn_sizes(g):
    """(N, E, k, D, D_out) per seed: k = 1, k >= 4, k = E and random ones, smallest first."""
    r = lambda lo, hi: int(torch.randint(lo, hi + 1, (), generator=g))  # noqa: E731
    out = []
    for kind in ("k1", "k4", "kE", "any"):
        e = r(4, 12)
        k = {"k1": 1, "k4": r(4, e), "kE": e, "any": r(1, e)}[kind]
        out.append((r(1, 9), e, k, r(1, 5), r(1, 4)))
    return sorted(out)


def test_drawn_shapes_match_oracle(sub, oracle, ctx):
    g = ctx.generator(304)
    runs = []
    with batch(sub) as b:
        for i, (n, e, k, d, d_out) in enumerate(_drawn_sizes(g)):
            dtype = cases.DTYPES[i % 2]
            x, u, idx, w = cases.make_case(g, n, e, k, d, d_out, dtype)
            idx = idx.to(torch.int32) if i % 2 else idx
            for sf in cases.SCORE_FUNCTIONS:
                runs.append(((n, e, k, d, d_out), dtype, sf, x, u, idx, w, b.replay_gates(u, idx, score_function=sf),
                             b.moe_replay_forward(x, u, idx, w, score_function=sf)))
    for size, dtype, sf, x, u, idx, w, gates, y in runs:
        what = f"(score_function={sf!r}) on (N, E, k, D, D_out) = {size}, {dtype}, {idx.dtype} ids"
        shown = {"router_logits": u, "expert_idx": idx}
        assert_close(gates.value, oracle.replay_gates(u, idx, score_function=sf), what=f"replay_gates{what}",
                     inputs=shown)
        assert_close(y.value, oracle.moe_replay_forward(x, u, idx, w, score_function=sf),
                     what=f"moe_replay_forward{what}", inputs=shown)


def test_large_batch_matches_reference(sub, ref, ctx):
    # values only (the gradients are checked on every small size): the size is what this adds
    g = ctx.generator(305)
    n = shared.LARGE_TOKENS + int(torch.randint(0, 64, (), generator=g))
    e, k, d, d_out = 6, int(torch.randint(2, 4, (), generator=g)), 2, 2  # small E, k, D: the size is in N
    sf = cases.SCORE_FUNCTIONS[int(torch.randint(0, 2, (), generator=g))]
    x, u, idx, w = cases.make_case(g, n, e, k, d, d_out, F64)
    with batch(sub) as b:
        gates = b.replay_gates(u, idx, score_function=sf)
        y = b.moe_replay_forward(x, u, idx, w, score_function=sf)
    what = f"(score_function={sf!r}) on N = {n} tokens, E = {e}, k = {k}, float64"
    assert_close(gates.value, ref.replay_gates(u, idx, score_function=sf), what=f"replay_gates{what}",
                 inputs={"expert_idx": idx})
    assert_close(y.value, ref.moe_replay_forward(x, u, idx, w, score_function=sf),
                 what=f"moe_replay_forward{what}", inputs={"expert_idx": idx})
