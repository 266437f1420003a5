"""T2: hand-checked values, the TIS/IcePop/GLM-5 contrast, inclusive endpoints in the native
dtype, the original denominator, detachment, padding and extremes.

Which test covers which class (more in test_t2_regimes.py):
- test_contrast_table / test_endpoints_are_inclusive / test_bounds_compared_in_native_dtype:
  exact ties at the band bounds, in float32 and float64 (neighbouring floats: test_t2_regimes);
  an on-policy batch (old_logp == rollout_logp) under bands that exclude 1: no "rho = 1, weight 1"
  shortcut.
- test_hand_checked_loss_and_gradient / test_rejected_tokens_stay_in_the_denominator: the
  denominator max(1, sum n_i) (slime's sum_i max(1, n_i) differs on the empty row), N / N_kept.
- test_gradient_is_weight_times_plain_ppo_gradient: w outside min/clip, random bands.
- test_weights_and_frozen_inputs_are_detached: stop-gradients, under both aggregations.
- test_padding_is_neutralised: NaN / +-inf / 1e30 padding, holes in rows, both aggregations.
- test_inputs_not_mutated: no in-place writes (the judge also checks every call).
- test_extreme_ratios / test_tiny_probabilities: rho = inf / 0 (log-ratios +-1000 / +-200) and
  e^-120 / e^-800 probabilities; in-band ratios e^60 / e^100 under a huge finite band (1e30,
  1e300): no +-20/+-50/+-88 clamp of the behaviour log-ratio (PPO-ratio overflow and
  +-25..+-800: test_t2_regimes).
"""

import math

import torch

from judge.cases import exact_log
from judge.testing import (Feedback, assert_close, assert_exactly_zero, assert_no_grad, batch,
                           check_tensor, describe, leaf, nonfinite_where_finite, sibling, visible)

cases = sibling(__file__, "_cases")
F32, F64 = torch.float32, torch.float64
NAN, INF = float("nan"), float("inf")
LN2 = math.log(2.0)


def _ratios(values, dtype):
    """old_logp (log-ratios hitting the values exactly where possible) and rollout_logp = 0."""
    old = torch.stack([exact_log(v, dtype) if v in (0.25, 0.5, 1.0, 1.2, 2.0, 4.0)
                       else torch.tensor(math.log(v), dtype=dtype) for v in values])[None]
    return old, torch.zeros_like(old)


@visible
def test_contrast_table(sub):
    # rho -> weight with the default band [.5, 2]: 0.3 -> 0, 0.5 -> .5, 1 -> 1, 2 -> 2, 4 -> 0.
    # (TIS clamp(rho, 0, 2) would give .3, .5, 1, 2, 2; GLM-5's strict (.5, 2) gives 0, 0, 1, 0, 0.)
    rhos = [0.3, 0.5, 1.0, 2.0, 4.0]
    with batch(sub) as b:
        calls = []
        for dtype in (F32, F64):
            old, rollout = _ratios(rhos, dtype)
            mask = torch.ones(1, 5, dtype=torch.bool)
            calls.append((dtype, old, rollout, b.icepop_weights(old, rollout, mask)))
        # rho = 1 is an ordinary ratio: an on-policy batch (old_logp equal to rollout_logp, rho = 1
        # on every token) under a band that excludes 1 has every weight 0 and a zero loss, not the
        # shortcut weight 1 of "no correction needed"
        on_policy = []
        for dtype, (low, high) in ((F32, (1.5, 3.0)), (F64, (0.25, 0.8))):
            old = torch.tensor([[-0.5, -1.0, -2.0], [-0.25, -3.0, -1.5]], dtype=dtype)
            mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
            lp = leaf(old + 0.1)
            # float32: the very same tensor as both arguments (a shortcut on `rollout_logp is
            # old_logp` is shown wrong); float64: an equal copy (one on torch.equal)
            rollout = old if dtype == F32 else old.clone()
            on_policy.append((dtype, low, high, old, lp, b.icepop_weights(old, rollout, mask, low=low, high=high),
                              b.icepop_ppo_loss(lp, old, rollout, torch.tensor([1.0, -1.0], dtype=dtype), mask,
                                                low=low, high=high)))
    for dtype, old, rollout, w in calls:
        assert_close(w.value, torch.tensor([[0.0, 0.5, 1.0, 2.0, 0.0]], dtype=F64),
                     what=f"icepop_weights for rho = {rhos} ({dtype}): expected [0, 0.5, 1, 2, 0] "
                     f"(the band is closed: both endpoints keep their weight; outside it is 0, "
                     f"not clamped)", inputs={"old_logp": old, "rollout_logp": rollout})
    for dtype, low, high, old, lp, w, loss in on_policy:
        what = (f"with old_logp equal to rollout_logp (rho = 1 on every token) and the band [{low}, {high}], "
                f"which excludes 1 ({dtype})")
        assert_close(w.value, torch.zeros(2, 3, dtype=F64), what=f"icepop_weights {what}: every weight is 0",
                     rtol=0, atol=0, inputs={"old_logp": old, "rollout_logp": old})
        assert_close(loss.value, torch.zeros((), dtype=F64), what=f"icepop_ppo_loss {what}: every token is "
                     f"rejected, so the loss is 0", rtol=0, atol=0, inputs={"logp": lp, "old_logp": old})


@visible
def test_endpoints_are_inclusive(sub):
    with batch(sub) as b:
        calls = []
        for dtype in (F32, F64):
            for low, high in ((0.5, 2.0), (0.25, 4.0), (1.0, 1.0), (0.5, 0.5)):
                old, rollout = _ratios([low, high], dtype)
                calls.append((dtype, low, high, old, rollout,
                              b.icepop_weights(old, rollout, torch.ones(1, 2, dtype=torch.bool),
                                               low=low, high=high)))
    for dtype, low, high, old, rollout, w in calls:
        assert_close(w.value, torch.tensor([[low, high]], dtype=F64),
                     what=f"icepop_weights at rho exactly equal to low={low} and high={high} "
                     f"({dtype}): both endpoints are kept (>= and <=, not > and <)",
                     inputs={"old_logp": old, "rollout_logp": rollout})


@visible
def test_bounds_compared_in_native_dtype(sub):
    # float32(1.2) = 1.2000000477 > 1.2: a ratio that is exactly float32(1.2) sits ON the bound
    # 1.2 when compared in float32 (torch casts a Python-float bound to the tensor's dtype).
    with batch(sub) as b:
        calls = []
        for dtype in (F32, F64):
            old, rollout = _ratios([1.2], dtype)
            mask = torch.ones(1, 1, dtype=torch.bool)
            for low, high in ((0.5, 1.2), (1.2, 2.0)):
                calls.append((dtype, old, rollout, low, high,
                              b.icepop_weights(old, rollout, mask, low=low, high=high)))
    for dtype, old, rollout, low, high, w in calls:
        rho = float(torch.exp(old - rollout))
        assert_close(w.value, torch.tensor([[rho]], dtype=F64),
                     what=f"icepop_weights for rho = {dtype}(1.2) = {rho!r} with band "
                     f"[{low}, {high}]: compare rho with the bounds in rho's own dtype "
                     f"(here the ratio equals the bound, so it is kept)",
                     inputs={"old_logp": old, "rollout_logp": rollout})


def _hand_case(dtype):
    """B=3, L=4, rollout_logp = 0, old_logp = log rho: row 0 (A=+1) rho=[.5, 1, 4, .25],
    r=[1, 1.5, .5, 2]; row 1 (A=-2) rho=[2, 1], r=[.5, 1.5], then NaN padding; row 2 (A=5) empty."""
    rho = [[0.5, 1.0, 4.0, 0.25], [2.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    r = [[1.0, 1.5, 0.5, 2.0], [0.5, 1.5, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    old = torch.stack([torch.stack([exact_log(v, dtype) for v in row]) for row in rho])
    logp = old + torch.log(torch.tensor(r, dtype=dtype))
    rollout = torch.zeros(3, 4, dtype=dtype)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    nan = torch.tensor(NAN, dtype=dtype)
    logp, old, rollout = (torch.where(mask, x, nan) for x in (logp, old, rollout))
    adv = torch.tensor([1.0, -2.0, 5.0], dtype=dtype)
    return logp, old, rollout, adv, mask


HAND = {
    # weights row 0 [.5, 1, 0, 0], row 1 [2, 1]; w*l: row 0 [-.5, -1.2, 0, 0], row 1 [3.2, 3].
    # N = 6 valid tokens: the two rejected ones stay in the denominator.
    True: (4.5 / 6, [[-0.5 / 6, 0.0, 0.0, 0.0], [0.0, 3.0 / 6, 0.0, 0.0], [0.0] * 4]),
    # seq-mean-token-mean: (-1.7/4 + 6.2/2 + 0) / 3, the empty row still counts in B = 3
    False: ((-0.425 + 3.1) / 3, [[-0.5 / 12, 0.0, 0.0, 0.0], [0.0, 3.0 / 6, 0.0, 0.0], [0.0] * 4]),
}


@visible
def test_hand_checked_loss_and_gradient(sub):
    with batch(sub) as b:
        calls = []
        for dtype in (F64, F32):
            logp, old, rollout, adv, mask = _hand_case(dtype)
            w = b.icepop_weights(old, rollout, mask)
            losses = []
            for per_token in HAND:
                lp = leaf(logp)
                losses.append((per_token, lp, b.icepop_ppo_loss(lp, old, rollout, adv, mask,
                                                                per_token_loss=per_token)))
            calls.append((dtype, (logp, old, rollout, adv, mask), w, losses))
    grads = []   # every value first, then one backward for all the losses
    for dtype, (logp, old, rollout, adv, mask), w, losses in calls:
        assert_close(w.value, torch.tensor([[0.5, 1, 0, 0], [2, 1, 0, 0], [0, 0, 0, 0]], dtype=F64),
                     what=f"icepop_weights on the hand-checked case ({dtype})",
                     inputs={"old_logp": old, "rollout_logp": rollout, "mask": mask})
        for per_token, lp, p in losses:
            loss_v, grad_v = HAND[per_token]
            loss = p.value
            what = f"icepop_ppo_loss on the hand-checked case (per_token_loss={per_token}, {dtype})"
            check_tensor(loss, what=what, shape=(), dtype=dtype)
            shown = {"logp": logp, "old_logp": old, "rollout_logp": rollout, "advantages": adv,
                     "mask": mask}
            assert_close(loss, torch.tensor(loss_v, dtype=F64), what=what + " (weights [.5, 1, "
                         "0, 0] and [2, 1] multiply the per-token PPO losses; rejected tokens stay "
                         "in the denominator)", inputs=shown)
            if not loss.requires_grad:
                raise Feedback(f"{what}: the loss is detached (requires_grad=False)")
            grads.append((loss, lp, grad_v, what, shown))
    torch.autograd.backward([loss for loss, *_ in grads])
    for _, lp, grad_v, what, shown in grads:
        assert_close(lp.grad, torch.tensor(grad_v, dtype=F64), what=f"d loss / d logp, {what}",
                     inputs=shown)


@visible
def test_rejected_tokens_stay_in_the_denominator(sub):
    # Two tokens, A = 1, r = 1: rho = 1 (kept) and rho = 4 (rejected). Loss = -(1 * 1 + 0) / 2;
    # renormalising by the kept tokens would give -1 (twice as large: N / N_kept).
    with batch(sub) as b:
        calls = []
        for dtype in (F64, F32):
            old, rollout = _ratios([1.0, 4.0], dtype)
            mask = torch.ones(1, 2, dtype=torch.bool)
            kept_and_rejected = [(per_token, b.icepop_ppo_loss(
                leaf(old), old, rollout, torch.tensor([1.0], dtype=dtype), mask,
                per_token_loss=per_token)) for per_token in (True, False)]
            first = (old, rollout, kept_and_rejected)
            # a single valid token, kept (rho = 2, A = 1.5, r = 1): loss = -2 * 1.5 / 1
            old, rollout = _ratios([2.0, 1.0], dtype)
            mask = torch.tensor([[True, False]])
            single = [(per_token, b.icepop_ppo_loss(
                leaf(old), old, rollout, torch.tensor([1.5], dtype=dtype), mask,
                per_token_loss=per_token)) for per_token in (True, False)]
            calls.append((dtype, first, (old, rollout, mask, single)))
    for dtype, (old, rollout, kept_and_rejected), (old1, rollout1, mask1, single) in calls:
        for per_token, loss in kept_and_rejected:
            assert_close(loss.value, torch.tensor(-0.5, dtype=F64),
                         what=f"icepop_ppo_loss with one kept and one rejected token "
                         f"(per_token_loss={per_token}, {dtype}): divide by the 2 original valid "
                         f"tokens, not by the 1 kept token",
                         inputs={"old_logp": old, "rollout_logp": rollout})
        for per_token, loss in single:
            assert_close(loss.value, torch.tensor(-3.0, dtype=F64),
                         what=f"icepop_ppo_loss with one valid token, rho = 2 (kept), A = 1.5, r = 1 "
                         f"(per_token_loss={per_token}, {dtype}): -w A / 1",
                         inputs={"old_logp": old1, "rollout_logp": rollout1, "mask": mask1})


def _plain_ppo_grads(logp, old, adv, mask):
    """The gradient of the uncorrected PPO-clip loss (weights 1) under each aggregation
    ({per_token_loss: grad}), from one autograd pass here: the per-token gradient of the
    summed token losses, divided by N (token-mean) or by B n_i (seq-mean-token-mean)."""
    valid = mask != 0
    lp = leaf(torch.where(valid, logp, torch.zeros_like(logp)))
    r = torch.exp(lp - torch.where(valid, old, torch.zeros_like(old)))
    a = adv[:, None]
    pg = torch.where(valid, -torch.minimum(r * a, r.clamp(0.8, 1.2) * a), torch.zeros_like(r))
    pg.sum().backward()
    g = lp.grad
    return {True: g / valid.sum().clamp(min=1),
            False: g / valid.sum(1, keepdim=True).clamp(min=1) / logp.shape[0]}


def test_gradient_is_weight_times_plain_ppo_gradient(sub, ref, ctx):
    g = ctx.generator(201)
    with batch(sub) as b:
        calls = []
        sweep = cases.cases(g, random_bounds=True, plant=lambda i: False)  # T1's plants: not needed
        for i, (case, (low, high)) in enumerate(sweep):
            args = (case["old_logp"], case["rollout_logp"], case["advantages"], case["mask"])
            w = (case["old_logp"], case["rollout_logp"], case["mask"], low, high)
            # one aggregation per size, in pairs (T T F F ...): each aggregation sees both dtypes,
            # both mask kinds and random bands (the oracle tests of T1 see every size with both)
            for per_token in ((i // 2) % 2 == 0,):
                lp = leaf(case["logp"])
                loss = b.icepop_ppo_loss(lp, *args, low=low, high=high, per_token_loss=per_token)
                calls.append((case, low, high, per_token, lp, loss, w))
    # while the submission runs: the plain PPO gradient and the reference's weights (the
    # submission's own weights are checked against the oracle in T1)
    plains, weights = {}, {}
    for case, low, high, per_token, lp, loss, w in calls:
        if id(case) not in plains:
            plains[id(case)] = _plain_ppo_grads(case["logp"], case["old_logp"], case["advantages"],
                                                case["mask"])
            old, rollout, mask, low, high = w
            weights[id(case)] = ref.icepop_weights(old, rollout, mask, low=low, high=high)
    cases.backward_all([c[5].value for c in calls],
                       [f"icepop_ppo_loss with band [{c[1]:.3g}, {c[2]:.3g}] (per_token_loss={c[3]})"
                        for c in calls])
    for case, low, high, per_token, lp, loss, w in calls:
        plain = plains[id(case)][per_token]
        w = weights[id(case)]
        assert_close(lp.grad, (w.to(plain.dtype) * plain).detach(),
                     what=f"d loss / d logp with band [{low:.3g}, {high:.3g}] "
                     f"(per_token_loss={per_token}) versus w times the plain PPO gradient: the "
                     f"weight multiplies the per-token loss, outside min/clip", inputs=case)


def test_weights_and_frozen_inputs_are_detached(sub):
    logp, old, rollout, adv, mask = _hand_case(F64)
    with batch(sub) as b:
        o, ro = leaf(old), leaf(rollout)
        pw = b.icepop_weights(o, ro, mask)
        runs = []
        for per_token in (True, False):
            leaves = [leaf(logp), leaf(old), leaf(rollout), leaf(adv)]
            runs.append((per_token, leaves, b.icepop_ppo_loss(*leaves, mask, per_token_loss=per_token)))
    w = pw.value
    if w.requires_grad:
        raise Feedback("icepop_weights returned a tensor that requires grad: the weights are a "
                       "stop-gradient correction (detach them)")
    torch.autograd.backward([ploss.value for _, _, ploss in runs])   # independent losses: one pass
    for per_token, (lp, o, ro, a), ploss in runs:
        tag = f" (icepop_ppo_loss, per_token_loss={per_token})"
        assert_no_grad(o, what="old_logp (frozen: the PPO ratio's denominator and rho's numerator)" + tag)
        assert_no_grad(ro, what="rollout_logp" + tag)
        assert_no_grad(a, what="advantages" + tag)
        if lp.grad is None or not bool((lp.grad != 0).any()):
            raise Feedback(f"logp must receive the gradient{tag}, got {describe(lp.grad)}")


def test_padding_is_neutralised(sub, oracle, ctx):
    g = ctx.generator(202)
    with batch(sub) as b:
        calls = []
        for p, pad in enumerate((NAN, INF, -INF, 1e30)):
            for d, dtype in enumerate((F32, F64)):
                case = cases.make_case(g, 3, 5, dtype, pad, bool_mask=(dtype == F32), empty_row=True,
                                       bounds=(0.5, 2.0))
                case["mask"][0, 2] = 0  # a hole in the middle of a response, too
                m = case["mask"] != 0
                for k in ("logp", "old_logp", "rollout_logp"):
                    case[k] = torch.where(m, case[k], torch.tensor(pad, dtype=dtype))
                args = (case["old_logp"], case["rollout_logp"], case["advantages"], case["mask"])
                w = b.icepop_weights(case["old_logp"], case["rollout_logp"], case["mask"])
                losses = []
                # one aggregation per (padding, dtype): each padding meets both aggregations, and
                # each (dtype, aggregation) two paddings
                for per_token in ((p + d) % 2 == 0,):
                    lp = leaf(case["logp"])
                    losses.append((per_token, lp, b.icepop_ppo_loss(lp, *args, per_token_loss=per_token)))
                calls.append((pad, case, m, args, w, losses))
    checked = []   # every value first, then one backward for all the losses
    for pad, case, m, args, w, losses in calls:
        want_w = oracle.icepop_weights(case["old_logp"], case["rollout_logp"], case["mask"])
        assert_close(w.value, want_w,
                     what=f"icepop_weights with padding {pad} (padded weights must be 0)",
                     inputs=case)
        for per_token, lp, p in losses:
            want = oracle.icepop_ppo_loss(case["logp"], *args, per_token_loss=per_token)
            loss = p.value
            what = f"icepop_ppo_loss with padding {pad} (per_token_loss={per_token})"
            assert_close(loss, want, what=what,
                         hint="neutralise padding with torch.where, never x * mask",
                         hint_when=nonfinite_where_finite, inputs=case)
            checked.append((loss, what, pad, m, lp))
    cases.backward_all([c[0] for c in checked], [c[1] for c in checked])
    for _, _, pad, m, lp in checked:
        assert_exactly_zero(lp.grad[~m], what=f"gradient at padded positions (padding {pad})")


def test_inputs_not_mutated(sub, ctx):
    g = ctx.generator(203)
    case = cases.make_case(g, 3, 4, F32, NAN, bool_mask=False, empty_row=True, bounds=(0.5, 2.0))
    before = {k: v.clone() for k, v in case.items()}
    with batch(sub) as b:
        w = b.icepop_weights(case["old_logp"], case["rollout_logp"], case["mask"])
        loss = b.icepop_ppo_loss(leaf(case["logp"]), case["old_logp"], case["rollout_logp"],
                                 case["advantages"], case["mask"], per_token_loss=False)
    w.value, loss.value  # noqa: B018 - the replies (and any in-place change) are in
    for k, v in case.items():
        same = (v == before[k]) | (torch.isnan(v) & torch.isnan(before[k]))
        if not bool(same.all()):
            raise Feedback(f"{k} was modified in place: before {describe(before[k])}, after "
                           f"{describe(v)}. Work on new tensors (torch.where, not masked_fill_)")


@visible
def test_extreme_ratios(sub):
    # rho = exp(+big) overflows to inf and exp(-big) underflows to 0: both are outside the band
    # and get weight 0, never NaN (select with torch.where; inf * 0 is NaN).
    with batch(sub) as b:
        calls = []
        for dtype, big in ((F64, 1000.0), (F32, 200.0)):
            old = torch.tensor([[-0.5, -0.5 - big, -0.5]], dtype=dtype)   # log-ratios +big, -big, 0
            rollout = torch.tensor([[-0.5 - big, -0.5, -0.5]], dtype=dtype)
            mask = torch.ones(1, 3, dtype=torch.bool)
            for low, high in ((0.5, 2.0), (0.0, 2.0)):
                w = b.icepop_weights(old, rollout, mask, low=low, high=high)
                lp = leaf(old)                                               # r = 1 everywhere
                loss = b.icepop_ppo_loss(lp, old, rollout, torch.tensor([1.0], dtype=dtype), mask,
                                         low=low, high=high)
                calls.append((dtype, big, old, rollout, low, high, w, lp, loss))
    losses = []   # every value first, then one backward for all the losses
    for dtype, big, old, rollout, low, high, w, lp, loss in calls:
        assert_close(w.value, torch.tensor([[0.0, 0.0, 1.0]], dtype=F64),
                     what=f"icepop_weights for log-ratios [{big}, {-big}, 0] with band "
                     f"[{low}, {high}] ({dtype}): inf and 0 get weight 0, no NaN",
                     inputs={"old_logp": old, "rollout_logp": rollout})
        what = (f"icepop_ppo_loss with behaviour log-ratios [{big}, {-big}, 0] and "
                f"band [{low}, {high}] ({dtype})")
        loss = loss.value
        assert_close(loss, torch.tensor(-1.0 / 3, dtype=F64),
                     what=f"{what}: only the last token counts, divided by 3")
        losses.append((loss, what))
    cases.backward_all([x[0] for x in losses], [x[1] for x in losses])
    for dtype, big, old, rollout, low, high, w, lp, loss in calls:
        assert_close(lp.grad, torch.tensor([[0.0, 0.0, -1.0 / 3]], dtype=F64),
                     what=f"d loss / d logp with huge behaviour ratios ({dtype}): rejected "
                     f"tokens get exactly 0, no NaN")


def test_tiny_probabilities(sub):
    # A rare token: old = rollout = -120 (float32) or -800 (float64). exp(old) underflows to 0,
    # but rho = exp(old - rollout) = 1. Form the ratio from the log difference.
    # The same call has a huge finite band (high = 1e30 / 1e300, legal: finite and > 0) and
    # in-band ratios e^60 (and e^100 in float64), then one just above high: the ratio is exp of
    # the log difference as it is, no library clamp of the log-ratio (+-20, +-50, +-88) first.
    with batch(sub) as b:
        calls = []
        for dtype, lv, high, big in ((F32, -120.0, 1e30, (60.0, 70.0)),
                                     (F64, -800.0, 1e300, (60.0, 100.0, 700.0))):
            old = torch.tensor([[lv, lv + math.log(1.5), lv + math.log(3.0), *(lv + x for x in big)]],
                               dtype=dtype)
            rollout = torch.full_like(old, lv)
            mask = torch.ones(old.shape, dtype=torch.bool)
            calls.append((dtype, lv, high, old, rollout,
                          b.icepop_weights(old, rollout, mask, low=0.5, high=high)))
    for dtype, lv, high, old, rollout, w in calls:
        rho = torch.exp((old - rollout).to(F64))
        assert_close(w.value, torch.where(rho <= high, rho, torch.zeros_like(rho)),
                     what=f"icepop_weights for log-probs near {lv} with band [0.5, {high:g}] "
                     f"({dtype}): rho = exp(old - rollout), not exp(old) / exp(rollout), and no "
                     f"clamp of the log-ratio",
                     inputs={"old_logp": old, "rollout_logp": rollout})
