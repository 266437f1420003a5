"""T2: overflow and underflow regimes, library conventions the spec departs from, widths used as
given, and float32 rewards with a large offset.

Which test covers which class (issue 17):
- test_overflowing_ratio_gets_zero_gradient: a valid token whose ratio overflows (float32
  log-ratio 100, float64 800) with A > 0 picks the clipped term: gradient exactly 0, not NaN.
- test_large_ratios_with_negative_advantages: ratios 4, 10, e^25 and one just below exp's overflow
  (e^80 float32, e^700 float64) with A < 0 are not clipped (no verl dual clip at c = 3, no +-20
  log-ratio clamp as in verl / SkyRL's safe_exp_delta, nor any other "safe exp" clamp).
- test_tiny_probabilities: log-probs of -110 (float32) / -800 (float64), whose exp is 0: the ratio
  comes from the log difference, never exp(a) / exp(b).
- test_clip_widths_used_as_given: widths 0, 1 and 1.5 checked for values (no "clip_high or
  clip_low" fallback, no validation), r = 1 exactly on a bound of width 0 (not clipped: gradient
  -A r, a ">=" decision gives 0) and r = e^-25 with A < 0 under a lower bound <= 0 (no floor).
- test_ratio_exactly_on_a_bound: float32 ratios equal to float32(1.2) / float32(0.7) and float64
  ones equal to 0.8 / 1.3, each ON its bound (not clipped) when compared in the inputs' dtype;
  upcasting a float32 ratio to float64, or building float64 bounds as float32 tensors, puts them
  outside and zeroes their gradient. Each bound is hit by the lowest and the highest log-ratio
  whose exp rounds to it (judge.cases.onto_bound: a clip decided on the log-ratio, logr >
  log1p(clip_high), clips one of them), and once more with float32 log-probs and float64
  advantages (computing in the promoted dtype compares a float32 ratio in float64).
- test_rewards_with_a_large_offset_float32: rewards 3000 +- 1 in float32 (a one-pass variance
  E[x^2] - mean^2 loses every digit there), and N = 0 in float32 and float64
  (the empty result keeps the rewards' dtype, normalize_std=False too).
"""

from __future__ import annotations

import math

import torch

from judge import cases as jc
from judge.testing import Feedback, assert_close, batch, check_tensor, describe, leaf, sibling

cases = sibling(__file__, "_cases")

F32, F64 = torch.float32, torch.float64


def _queue(b, log_ratios, A, dtype, old=0.0, adv_dtype=None, **kwargs):
    """One response per log-ratio, one valid token each (plus a NaN-padded slot), queued in ``b``;
    the advantages in ``adv_dtype`` (default: ``dtype``)."""
    B = len(log_ratios)
    old_t = torch.full((B, 2), old, dtype=dtype)
    logp = old_t + torch.tensor([[x, 0.0] for x in log_ratios], dtype=dtype)
    mask = torch.tensor([[True, False]] * B)
    logp, old_t = jc.pad(logp, mask, math.nan), jc.pad(old_t, mask, math.nan)
    adv = torch.tensor(A, dtype=adv_dtype or dtype)
    lp = leaf(logp)
    inputs = {"logp": logp, "old_logp": old_t, "advantages": adv, "mask": mask, **kwargs}
    return lp, inputs, b.grpo_loss(lp, old_t, adv, mask, **kwargs)


def _check(lp, inputs, pending, exp_tok, exp_grad_tok, what, rtol=None):
    """Both aggregations agree here (one token per response): loss = mean of the token losses."""
    B = lp.shape[0]
    dtype = lp.dtype
    loss = check_tensor(pending.value, what=what, shape=(), dtype=dtype)
    expected = torch.tensor(sum(exp_tok) / B, dtype=F64)
    assert_close(loss, expected, what=what, inputs=inputs, rtol=rtol)
    loss.backward()
    grad = torch.zeros(B, 2, dtype=F64)
    grad[:, 0] = torch.tensor(exp_grad_tok, dtype=F64) / B
    if lp.grad is None:
        raise Feedback(f"{what}: logp.grad is None after backward")
    assert_close(lp.grad, grad, what=f"d {what} / d logp", inputs=inputs, rtol=rtol)


def test_overflowing_ratio_gets_zero_gradient(sub):
    with batch(sub) as b:
        queued = []
        for dtype in (F32, F64):
            big = jc.OVERFLOW_LOG_RATIOS[dtype][0]
            assert math.isinf(float(torch.exp(torch.tensor(big, dtype=dtype))))  # setup: exp overflows
            for per_token in (False, True):
                queued.append((dtype, big, per_token,
                               _queue(b, [big, 0.1, -0.1], [1.0, 1.0, 2.0], dtype, per_token_loss=per_token)))
    for dtype, big, per_token, (lp, inputs, pending) in queued:
        r1, r2 = math.exp(0.1), math.exp(-0.1)
        _check(lp, inputs, pending, [-1.2, -r1, -2 * r2], [0.0, -r1, -2 * r2],
               what=f"grpo_loss with a valid log-ratio of {big} ({dtype}, A = +1, per_token_loss={per_token}): "
                    f"the ratio overflows to inf, the min picks the clipped term (1 + clip_high) A, whose "
                    f"gradient is 0; exp's backward at inf gives 0 * inf = NaN unless the overflowing ratio "
                    f"is kept out of the graph (decide the branch first, e.g. with torch.where on the "
                    f"log-ratio)")


def test_large_ratios_with_negative_advantages(sub):
    with batch(sub) as b:
        queued = []
        for dtype in (F32, F64):
            # the last log-ratio is just below the dtype's exp overflow (88.7 / 709.8): a "safe
            # exp" clamp anywhere below it (at 50, 60, 80...) changes that token's loss
            top = 80.0 if dtype == F32 else 700.0
            log_ratios = [math.log(4.0), math.log(10.0), 25.0, top]
            queued.append((dtype, top,
                           _queue(b, log_ratios, [-1.0, -0.5, -2.0, -1.0], dtype)))
    for dtype, top, (lp, inputs, pending) in queued:
        A = [-1.0, -0.5, -2.0, -1.0]
        r = torch.exp(inputs["logp"][:, 0].to(F64)).tolist()   # the ratios as the dtype holds them
        _check(lp, inputs, pending, [-ri * a for ri, a in zip(r, A)], [-a * ri for ri, a in zip(r, A)],
               what=f"grpo_loss with ratios [4, 10, e^25, e^{top:g}] and A = [-1, -0.5, -2, -1] ({dtype}): for "
                    f"A < 0 the min keeps r A however large r is (loss -r A, gradient -A r); no dual clip at 3 "
                    f"(verl's clip_ratio_c) and no clamp of the log-ratio (verl's +-20, nor any other below "
                    f"exp's overflow)")


def test_tiny_probabilities(sub):
    with batch(sub) as b:
        queued = []
        for dtype in (F32, F64):
            tiny = jc.TINY_LOGP[dtype]
            assert float(torch.exp(torch.tensor(tiny, dtype=dtype))) == 0.0  # setup: the probability is 0
            queued.append((dtype, tiny, _queue(b, [0.1, -0.15, 0.05], [1.0, -1.0, 0.5], dtype, old=tiny)))
    for dtype, tiny, (lp, inputs, pending) in queued:
        d = (inputs["logp"][:, 0].to(F64) - inputs["old_logp"][:, 0].to(F64)).tolist()
        r = [math.exp(x) for x in d]
        A = [1.0, -1.0, 0.5]
        _check(lp, inputs, pending, [-x * a for x, a in zip(r, A)], [-a * x for x, a in zip(r, A)],
               what=f"grpo_loss with log-probs near {tiny} ({dtype}): exp(logp) and exp(old_logp) are both 0 "
                    f"there; form the ratio as exp(logp - old_logp), not exp(logp) / exp(old_logp)",
               rtol=1e-4 if dtype == F32 else None)


def test_clip_widths_used_as_given(sub):
    # (clip_low, clip_high, log-ratios, A, token losses, token gradients)
    # A log-ratio of 0 (r = 1 exactly) with a width of 0 sits ON the bound: both terms of the min
    # are equal, the token is not clipped (the zero-gradient cases are r > 1 + clip_high with A > 0
    # and r < 1 - clip_low with A < 0, strictly), so its gradient is -A r (what autograd gives for
    # the literal -min(r A, clip(r) A) too); a ">=" decision gives 0. A ratio of e^-25 with
    # A < 0 and clip_low >= 1 is not clipped either: a lower bound <= 0 never binds (no floor
    # such as max(1 - clip_low, 1e-6)).
    e25 = math.exp(-25.0)
    table = [
        (0.2, 0.0, [math.log(1.1), math.log(0.9), 0.0], [1.0, 1.0, 1.0], [-1.0, -0.9, -1.0], [0.0, -0.9, -1.0]),
        (0.0, 0.2, [math.log(0.9), math.log(1.1), 0.0], [-1.0, -1.0, -1.0], [1.0, 1.1, 1.0], [0.0, 1.1, 1.0]),
        (0.0, 0.0, [math.log(1.3), math.log(0.7), 0.0, 0.0], [1.0, -1.0, 1.0, -1.0], [-1.0, 1.0, -1.0, 1.0],
         [0.0, 0.0, -1.0, 1.0]),
        (1.0, 0.5, [math.log(0.25), math.log(1.6), -25.0], [-1.0, 2.0, -1.0], [0.25, -3.0, e25], [0.25, 0.0, e25]),
        (1.5, 0.5, [math.log(0.25), math.log(0.5), -25.0], [-1.0, 1.0, -2.0], [0.25, -0.5, 2 * e25],
         [0.25, -0.5, 2 * e25]),
    ]
    with batch(sub) as b:
        queued = [(row, _queue(b, row[2], row[3], F64, clip_low=row[0], clip_high=row[1])) for row in table]
    for (cl, ch, lr, A, tok, grad), (lp, inputs, pending) in queued:
        _check(lp, inputs, pending, tok, grad,
               what=f"grpo_loss with clip_low={cl}, clip_high={ch}, ratios "
                    f"{[round(math.exp(x), 4) for x in lr]}, A = {A}: the widths are used as given "
                    f"(a width of 0 is a width, not 'unset'; r = 1 on a bound of width 0 is not clipped, its "
                    f"gradient is -A r; a lower bound <= 0 never binds, not even for r = e^-25)")


def test_ratio_exactly_on_a_bound(sub):
    """A ratio equal to its bound in the inputs' dtype is not clipped: the two terms of the min
    are equal and the gradient is -A r. float32(1.2) = 1.2000000477 is above the float64 number
    1.2 and float32(0.7) = 0.6999999881 below 0.7, so a comparison after upcasting the float32
    ratio to float64 clips them; float32 bounds (torch.tensor(1 - clip_low)) clip the float64
    ratios 0.8 and 1.3 (float32(0.8) > 0.8, float32(1.3) < 1.3)."""
    # (dtype, advantages' dtype, clip_low, clip_high, [(bound value, A)]); each bound is reached by
    # exact_log's log-ratio and by the two edges of the set whose exp rounds to the bound (one
    # row each, all in one call)
    table = [(F32, F32, 0.3, 0.2, [(1.2, 1.0), (0.7, -1.0)]),
             (F64, F64, 0.2, 0.3, [(0.8, -1.0), (1.3, 2.0)]),
             (F32, F64, 0.3, 0.2, [(1.2, 1.0), (0.7, -1.0)])]
    with batch(sub) as b:
        queued = []
        for dtype, adt, cl, ch, rows in table:
            lrs, A = [], []
            for v, a in rows:
                for x in [float(jc.exact_log(v, dtype))] + [float(y) for y in jc.onto_bound(v, dtype)]:
                    lrs.append(x)
                    A.append(a)
            queued.append((dtype, adt, cl, ch, A,
                           _queue(b, lrs, A, dtype, adv_dtype=adt, clip_low=cl, clip_high=ch)))
    for dtype, adt, cl, ch, A, (lp, inputs, pending) in queued:
        r = torch.exp(inputs["logp"][:, 0]).to(F64).tolist()     # == dtype(bound), as set up
        _check(lp, inputs, pending, [-ri * a for ri, a in zip(r, A)], [-a * ri for ri, a in zip(r, A)],
               what=f"grpo_loss with ratios {[repr(x) for x in r]} ({dtype}, advantages "
                    f"{str(adt).replace('torch.', '')}; log-ratios {[repr(x) for x in inputs['logp'][:, 0].tolist()]}), "
                    f"each equal to its bound "
                    f"(clip_low={cl}, clip_high={ch}) in {str(dtype).replace('torch.', '')}, A = {A}: compare "
                    f"the ratio with the bounds in the inputs' dtype (not after upcasting a float32 ratio "
                    f"to float64 or into the advantages' dtype, not with float32 bounds for float64 inputs, "
                    f"not the log-ratio with log(1 + clip_high)); a ratio on its bound is "
                    f"not clipped (both terms are equal, the gradient is -A r)")


def test_rewards_with_a_large_offset_float32(sub, oracle):
    offsets = [[-1.0, 1.0, 0.0, 1.0], [1.0, 1.0, -1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
    rewards = torch.tensor([3000.0 + x for row in offsets for x in row], dtype=F32)
    with batch(sub) as b:
        outs = [(G, kw, b.group_advantages(rewards, G, **kw)) for G in (4, 12)
                for kw in ({}, {"eps": 0.1})]
        # N = 0 in both dtypes: an early `return torch.empty(0)` is float32 (the default dtype)
        # whatever the rewards' dtype, so only a float64 call tells it from a correct return
        empties = [(dt, G, kw, b.group_advantages(torch.zeros(0, dtype=dt), G, **kw))
                   for dt, G, kw in ((F32, 4, {}), (F64, 3, {"normalize_std": False}), (F64, 2, {}))]
    for G, kw, pending in outs:
        what = (f"group_advantages(rewards 3000 + small integers, float32, group_size={G}"
                + "".join(f", {k}={v}" for k, v in kw.items()) + ")")
        out = check_tensor(pending.value, what=what, shape=(12,), dtype=F32)
        assert_close(out, oracle.group_advantages(rewards, G, **kw), what=what + ": centre first, then "
                     "square (E[x^2] - mean^2 in float32 cancels catastrophically at 3000^2 = 9e6)",
                     inputs={"rewards": rewards, "group_size": G, **kw})
    for dt, G, kw, pending in empties:
        out = pending.value
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (0,) or out.dtype != dt:
            raise Feedback(f"group_advantages of N = 0 {dt} rewards (0 is a multiple of group_size={G}"
                           + "".join(f", {k}={v}" for k, v in kw.items())
                           + f"): expected an empty {dt} tensor of shape (0,) (the dtype of rewards), "
                           f"got {describe(out)}")
