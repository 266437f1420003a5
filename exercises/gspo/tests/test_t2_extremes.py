"""T2: long responses, large and overflowing sequence ratios, tiny probabilities and clip_eps used
as given.

Which test covers which class (issue 17):
- test_long_responses: 400-token responses whose summed log-ratio is +-120: the geometric mean
  is finite, a product of token ratios (or exp of the sum) overflows / underflows first.
- test_large_sequence_ratios: mean log-ratio 12 with A < 0 (loss -s A = |A| e^12: no clamp of
  log s at 10 as verl's compute_policy_loss_gspo does), and an overflowing s with A > 0 (clipped:
  gradient 0, not NaN); in the same calls, mean log-ratios 60 / 85 (float32) and 100 / 700
  (float64) with A < 0 and their negatives with A > 0 (no safe-exp clamp of log s at
  +-20/+-50/+-88, no floor: the tiny s are compared relatively).
- test_tiny_probabilities: log-probs of -110 (float32) / -800 (float64), whose exp is 0.
- test_clip_eps_used_as_given: clip_eps 0, 1 and 1.5 checked for values (no validation, no
  "clip_eps or 0.2"), s = 1 exactly on the band [1, 1] of clip_eps = 0 (not clipped: a ">="
  decision zeroes its gradient) and s = e^-25 with A < 0 under a lower bound <= 0 (no floor).
- test_sequence_ratio_exactly_on_a_bound: float32 s equal to float32(1.2), float32(0.8),
  float32(0.7), float32(1.3) and float64 s equal to 0.8 and 1.2, each ON its bound (not clipped)
  when compared in the inputs' dtype; upcasting a float32 s to float64, or float32 bounds for
  float64 inputs, clips some of them. Each bound is also hit by the lowest and the highest
  log-ratio whose exp rounds to it (judge.cases.onto_bound: a clip decided on log s, log s >
  log1p(clip_eps), clips one of them), and the float32 rows once more with float64 advantages
  (computing in the promoted dtype compares a float32 s in float64).
"""

from __future__ import annotations

import math

import torch

from judge import cases as jc
from judge.testing import Feedback, assert_close, batch, check_tensor, leaf, sibling

cases = sibling(__file__, "_cases")

F32, F64 = torch.float32, torch.float64


def _rows(b, rows, A, dtype, base=-1.0, adv_dtype=None, **kwargs):
    """One response per list of valid-token log-ratios (padded with NaN to the longest), old_logp = base;
    the advantages in ``adv_dtype`` (default: ``dtype``)."""
    B, L = len(rows), max(len(r) for r in rows) + 1
    mask = torch.zeros(B, L, dtype=torch.bool)
    delta = torch.zeros(B, L, dtype=F64)
    for i, r in enumerate(rows):
        mask[i, :len(r)] = True
        delta[i, :len(r)] = torch.tensor(r, dtype=F64)
    old = torch.full((B, L), base, dtype=F64)
    logp = jc.pad((old + delta).to(dtype), mask, math.nan)
    old = jc.pad(old.to(dtype), mask, math.nan)
    adv = torch.tensor(A, dtype=adv_dtype or dtype)
    x = leaf(logp)
    inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask, **kwargs}
    return x, inputs, b.sequence_ratio(logp, old, mask), b.gspo_loss(x, old, adv, mask, **kwargs)


def _expect(inputs, eps):
    """(s, loss, gradient) in float64 from the inputs as the dtype holds them."""
    m = inputs["mask"]
    d = torch.where(m, inputs["logp"].double() - inputs["old_logp"].double(), 0.0)
    n = m.sum(-1)
    s_native = torch.exp(d.sum(-1) / n).to(inputs["logp"].dtype)
    s = s_native.double()
    A = inputs["advantages"].double()
    B = len(A)
    # compared with the bounds in the inputs' dtype (a Python float is rounded to it), as the spec says
    clipped = ((A > 0) & (s_native > 1 + eps)) | ((A < 0) & (s_native < 1 - eps))
    J = torch.minimum(s * A, s.clamp(1 - eps, 1 + eps) * A)
    grad = torch.where(clipped[:, None] | ~m, 0.0, (-A * s / (B * n))[:, None].expand(m.shape))
    return s, -J.sum() / B, grad


def _check(x, inputs, s, loss, what, eps=0.2, rtol=None, s_atol=None):
    """``s_atol=0.0``: s compared relatively only (an s of e^-60 is below any absolute tolerance)."""
    exp_s, exp_loss, exp_grad = _expect(inputs, eps)
    s = check_tensor(s.value, what=f"sequence_ratio, {what}", shape=tuple(exp_s.shape), dtype=x.dtype)
    assert_close(s, exp_s, what=f"sequence_ratio, {what}", inputs=inputs, rtol=rtol, atol=s_atol)
    loss = check_tensor(loss.value, what=f"gspo_loss, {what}", shape=(), dtype=x.dtype)
    assert_close(loss, exp_loss, what=f"gspo_loss, {what}", inputs=inputs, rtol=rtol)
    loss.backward()
    if x.grad is None:
        raise Feedback(f"gspo_loss, {what}: logp.grad is None after backward")
    assert_close(x.grad, exp_grad, what=f"d gspo_loss / d logp, {what}", inputs=inputs, rtol=rtol)


def test_long_responses(sub):
    with batch(sub) as b:
        queued = []
        for dtype in (F32, F64):
            rows = [[0.3] * 400, [-0.3] * 400, [0.05, -0.05] * 200]
            queued.append((dtype, _rows(b, rows, [-1.0, 1.0, 0.5], dtype, clip_eps=0.5)))
    for dtype, q in queued:
        _check(*q, what=f"three 400-token responses with log-ratios 0.3, -0.3 and +-0.05 ({dtype}): s is the "
                        f"geometric mean exp(120 / 400) = 1.35, exp(-0.3) and 1; a product of the token ratios "
                        f"(e^120, e^-120) overflows or underflows before the 1/n root", eps=0.5,
               rtol=1e-4 if dtype == F32 else None)


def test_large_sequence_ratios(sub):
    # rows 1-4: mean log-ratio 12 with A < 0 (no clamp of log s at 10) and an overflowing s with
    # A > 0; rows 5-8: beyond the safe-exp clamps (+-20, +-50, +-88), mean log-ratios up to just
    # below exp's overflow (60 and 85 in float32, 100 and 700 in float64) with A < 0, and their
    # negatives with A > 0 (not clipped), whose s = e^-60 ... e^-700 is compared relatively
    # (s_atol=0: a floor on log s shows in sequence_ratio even where no loss tolerance sees it).
    # The e^12 rows stay visible next to e^700 in their per-token gradients and in s.
    with batch(sub) as b:
        queued = []
        for dtype in (F32, F64):
            over = jc.OVERFLOW_LOG_RATIOS[dtype][0]
            e1, e2 = jc.EXTREME_LOG_RATIOS[dtype][1:]
            rows = [[12.0, 12.0], [11.5, 12.5, 12.0], [over, over], [0.1],
                    [e1 - 0.5, e1 + 0.5], [e2], [-e1], [-e2, -e2]]
            queued.append((dtype, over, (e1, e2),
                           _rows(b, rows, [-1.0, -0.5, 1.0, 1.0, -1.0, -0.5, 1.0, 2.0], dtype)))
    for dtype, over, (e1, e2), q in queued:
        _check(*q, what=f"mean log-ratios 12, 12, {over}, 0.1, {e1}, {e2}, -{e1}, -{e2} with "
                        f"A = [-1, -0.5, 1, 1, -1, -0.5, 1, 2] ({dtype}): for A < 0 the min keeps s A however "
                        f"large s is (no clamp of log s at 10, +-20, +-50 or +-88), for A > 0 a tiny s is not "
                        f"clipped nor floored; an s that overflows with A > 0 is clipped, and its gradient is "
                        f"exactly 0 (exp's backward at inf gives 0 * inf = NaN unless s is kept out of the "
                        f"graph there)", s_atol=0.0)


def test_tiny_probabilities(sub):
    with batch(sub) as b:
        queued = []
        for dtype in (F32, F64):
            tiny = jc.TINY_LOGP[dtype]
            assert float(torch.exp(torch.tensor(tiny, dtype=dtype))) == 0.0   # setup: the probability is 0
            rows = [[0.1, -0.05], [0.15], [-0.1, 0.02, 0.01]]
            queued.append((dtype, tiny, _rows(b, rows, [1.0, -1.0, 0.5], dtype, base=tiny)))
    for dtype, tiny, q in queued:
        _check(*q, what=f"log-probs near {tiny} ({dtype}): exp(logp) and exp(old_logp) are 0 there; form the "
                        f"ratio from the log difference", rtol=1e-4 if dtype == F32 else None)


def test_clip_eps_used_as_given(sub):
    # s = 1 exactly (logp == old_logp) with clip_eps = 0 sits ON the band [1, 1]: not clipped
    # (A > 0 with s <= 1 + eps, A < 0 with s >= 1 - eps), gradient -A s / (B n); a ">=" decision
    # gives 0. s = e^-25 with A < 0 and clip_eps >= 1 is not clipped either (no floor on 1 - eps).
    rows = [[math.log(1.1)], [math.log(0.9)], [math.log(3.0)], [math.log(0.2)], [0.0], [0.0, 0.0],
            [-25.0]]
    A = [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, -1.0]
    with batch(sub) as b:
        queued = [(eps, _rows(b, rows, A, F64, clip_eps=eps)) for eps in (0.0, 1.0, 1.5)]
    for eps, q in queued:
        _check(*q, eps=eps, what=f"sequence ratios [1.1, 0.9, 3, 0.2, 1, 1, e^-25] with A = {A} and clip_eps={eps}: "
                                 f"the width is used as given (0 is a width, not 'unset'; s = 1 on the band [1, 1] is "
                                 f"not clipped, its gradient is -A s / (B n); a lower bound <= 0 never binds, not "
                                 f"even for s = e^-25)")


def test_sequence_ratio_exactly_on_a_bound(sub):
    """An s equal to its bound in the inputs' dtype is not clipped: gradient -A s / (B n).
    float32(1.2) = 1.2000000477 is above the float64 number 1.2 and float32(0.7) = 0.6999999881
    below 0.7, so comparing after upcasting a float32 s to float64 clips them; float32 bounds
    (torch.tensor(1 - eps)) clip the float64 s = 0.8 (float32(0.8) > 0.8) and s = 1.2."""
    # (dtype, advantages' dtype, clip_eps, [(bound value, A)]); each bound is reached by exact_log's
    # log-ratio and by the two edges of the set whose exp rounds to it (one response each)
    table = [(F32, F32, 0.2, [(1.2, 1.0), (0.8, -0.5)]), (F32, F32, 0.3, [(0.7, -1.0), (1.3, 1.0)]),
             (F64, F64, 0.2, [(0.8, -1.0), (1.2, 2.0)]), (F32, F64, 0.2, [(1.2, 1.0), (0.8, -0.5)])]
    with batch(sub) as b:
        queued = []
        for dtype, adt, eps, pairs in table:
            rows, A = [], []
            for v, a in pairs:
                for x in [float(jc.exact_log(v, dtype))] + [float(y) for y in jc.onto_bound(v, dtype)]:
                    rows.append([x])
                    A.append(a)
            queued.append((dtype, adt, eps, pairs, _rows(b, rows, A, dtype, base=0.0, adv_dtype=adt, clip_eps=eps)))
    for dtype, adt, eps, pairs, q in queued:
        _check(*q, eps=eps, what=f"one-token responses with s = {[v for v, _ in pairs]} as {dtype} values, advantages "
                                 f"{adt} (log-ratios {q[1]['logp'][:, 0].tolist()}: each "
                                 f"equal to its bound for clip_eps={eps}) and A = {[a for _, a in pairs]}: compare s "
                                 f"with the bounds in the inputs' dtype (not after upcasting a float32 s to float64 or "
                                 f"into the advantages' dtype, not with float32 bounds for float64 inputs, not log s "
                                 f"with log(1 + clip_eps)); an s on its bound is not clipped "
                                 f"(gradient -A s / (B n))")
