"""T2: hand-checked values, the TIS/IcePop/GLM-5 contrast, detachment, padding and extremes.

Which test covers which class (issue 17): the contrast table and the hand-checked case (defaults),
w times the PPO gradient, detachment (also with only rollout_logp requiring grad), padding, mutation, rho overflowing/underflowing
(test_extreme_ratios, each bound also given alone) and tiny probabilities (test_tiny_probabilities). Overflowing PPO ratios,
dual clip / +-20 clamps and PPO widths used as given are in test_t2_extremes.py.
"""

import math

import torch

from judge.testing import (Feedback, assert_close, assert_exactly_zero, assert_no_grad, batch,
                           check_tensor, describe, leaf, nonfinite_where_finite, sibling, visible)

cases = sibling(__file__, "_cases")
F32, F64 = torch.float32, torch.float64
NAN, INF = float("nan"), float("inf")
LN2 = math.log(2.0)


def _exact(log_ratio: torch.Tensor, expected: list[float], what: str) -> None:
    """Guard for the test itself: exp(log_ratio) must equal the intended ratios in its dtype."""
    got = torch.exp(log_ratio).tolist()
    for g_, e in zip(got, expected):
        if e is not None and g_ != e:
            raise AssertionError(f"test construction: exp gives {g_} instead of {e} ({what})")


@visible
def test_contrast_table(sub):
    # rho -> weight with the default [0, 2]: 0.3 -> .3, 0.5 -> .5, 1 -> 1, 2 -> 2, 4 -> 2.
    # (IcePop [.5, 2] would give 0, .5, 1, 2, 0 and GLM-5's strict (.5, 2) gives 0, 0, 1, 0, 0.)
    # Then 2 (1 - 3e-6), 3e-6 (relative) below U: kept as is; an isclose() snap to the bound
    # (rtol 1e-5) is off by 3e-6, which the float64 tolerance sees.
    rhos = [0.3, 0.5, 1.0, 2.0, 4.0, 2 * (1 - 3e-6)]
    with batch(sub) as b:
        queued = []
        for dtype in (F32, F64):
            old = torch.tensor([[math.log(0.3), -LN2, 0.0, LN2, 2 * LN2, LN2 + math.log1p(-3e-6)]], dtype=dtype)
            _exact(old[0], [None, 0.5, 1.0, 2.0, 4.0, None], str(dtype))
            rollout = torch.zeros(1, 6, dtype=dtype)
            mask = torch.ones(1, 6, dtype=torch.bool)
            queued.append((dtype, old, rollout, b.tis_weights(old, rollout, mask)))
        # rho = 1 is clamped like any ratio: one tensor passed as both log-probs (rho = 1 on
        # every token) with clip_low = 1.5 weighs 1.5, not the 1 of "nothing to correct";
        # clip_high is left at its default 2 (a lower bound read only when the upper one is
        # given too is off)
        same = torch.tensor([[-0.5, -1.0, -2.0]], dtype=F32)
        on_policy = b.tis_weights(same, same, torch.ones(1, 3, dtype=torch.bool), clip_low=1.5)
    assert_close(on_policy.value, torch.full((1, 3), 1.5, dtype=F64), rtol=0, atol=0,
                 what="tis_weights(x, x, mask, clip_low=1.5) (clip_high the default 2), one tensor as "
                 "both log-probs: rho = 1 is clamped to 1.5", inputs={"old_logp": same, "rollout_logp": same})
    for dtype, old, rollout, pending in queued:
        w = pending.value
        want = torch.exp(old).clamp(max=2.0)
        assert_close(w, want, what=f"tis_weights for rho = {rhos} ({dtype}): expected "
                     f"[0.3, 0.5, 1, 2, 2, 1.999994] (clamp, never zero; a ratio near U is not U)",
                     inputs={"old_logp": old, "rollout_logp": rollout})


def _hand_case(dtype):
    """B=3, L=4: row 0 (A=+1) rho=[.5, 1, 4, .25], r=[1, 1.5, .5, 2]; row 1 (A=-2) rho=[2, 1],
    r=[.5, 1.5] then NaN padding; row 2 (A=5) is empty."""
    rho = [[0.5, 1.0, 4.0, 0.25], [2.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    r = [[1.0, 1.5, 0.5, 2.0], [0.5, 1.5, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    old = torch.full((3, 4), -1.0, dtype=F64)
    logp = old + torch.log(torch.tensor(r, dtype=F64))
    rollout = old - torch.log(torch.tensor(rho, dtype=F64))
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    logp, old, rollout = (torch.where(mask, x, torch.tensor(NAN, dtype=F64)) for x in (logp, old, rollout))
    adv = torch.tensor([1.0, -2.0, 5.0], dtype=F64)
    return logp.to(dtype), old.to(dtype), rollout.to(dtype), adv.to(dtype), mask


HAND = {
    # per-token losses w*l: row 0 [-.5, -1.2, -1, -.3], row 1 [3.2, 3]; N = 6 valid tokens
    True: (3.2 / 6, [[-0.5 / 6, 0.0, -1.0 / 6, 0.0], [0.0, 3.0 / 6, 0.0, 0.0], [0.0] * 4]),
    # seq-mean-token-mean: (-3/4 + 6.2/2 + 0) / 3, the empty row still counts in B = 3
    False: ((-0.75 + 3.1) / 3, [[-0.5 / 12, 0.0, -1.0 / 12, 0.0], [0.0, 3.0 / 6, 0.0, 0.0], [0.0] * 4]),
}


@visible
def test_hand_checked_loss_and_gradient(sub):
    with batch(sub) as b:
        queued = []
        for dtype in (F64, F32):
            for per_token, (loss_v, grad_v) in HAND.items():
                logp, old, rollout, adv, mask = _hand_case(dtype)
                lp = leaf(logp)
                queued.append((dtype, per_token, loss_v, grad_v, (logp, old, rollout, adv, mask), lp,
                               b.tis_ppo_loss(lp, old, rollout, adv, mask, per_token_loss=per_token)))
    grads = []   # every value first, then one backward for all the losses
    for dtype, per_token, loss_v, grad_v, (logp, old, rollout, adv, mask), lp, pending in queued:
        loss = pending.value
        what = f"tis_ppo_loss on the hand-checked case (per_token_loss={per_token}, {dtype})"
        check_tensor(loss, what=what, shape=(), dtype=dtype)
        shown = {"logp": logp, "old_logp": old, "rollout_logp": rollout, "advantages": adv,
                 "mask": mask}
        assert_close(loss, torch.tensor(loss_v, dtype=F64), what=what + " (weights "
                     "[.5, 1, 2, .25] and [2, 1] multiply the per-token PPO losses)",
                     inputs=shown)
        if not loss.requires_grad:
            raise Feedback(f"{what}: the loss is detached (requires_grad=False)")
        grads.append((loss, lp, grad_v, what, shown))
    torch.autograd.backward([loss for loss, *_ in grads])
    for _, lp, grad_v, what, shown in grads:
        assert_close(lp.grad, torch.tensor(grad_v, dtype=F64), what=f"d loss / d logp, {what}",
                     inputs=shown)


@visible
def test_no_correction_bounds_give_plain_ppo(sub):
    # tis_low = tis_high = 1 makes every weight 1: the plain PPO loss. Hand case:
    # row 0 [-1, -1.2, -.5, -1.2], row 1 [1.6, 3] -> (−3.9 + 4.6) / 6.
    with batch(sub) as b:
        queued = []
        for dtype in (F64, F32):
            logp, old, rollout, adv, mask = _hand_case(dtype)
            queued.append((dtype, old, rollout, mask,
                           b.tis_weights(old, rollout, mask, clip_low=1.0, clip_high=1.0),
                           b.tis_ppo_loss(leaf(logp), old, rollout, adv, mask, tis_low=1.0, tis_high=1.0)))
    for dtype, old, rollout, mask, pending_w, pending_loss in queued:
        w = pending_w.value
        assert_close(w, mask.to(F64), what=f"tis_weights with clip_low = clip_high = 1 ({dtype})",
                     inputs={"old_logp": old, "rollout_logp": rollout, "mask": mask})
        loss = pending_loss.value
        assert_close(loss, torch.tensor(0.7 / 6, dtype=F64),
                     what=f"tis_ppo_loss with tis_low = tis_high = 1 ({dtype})")


def test_gradient_is_weight_times_plain_ppo_gradient(sub, ref, ctx):
    g = ctx.generator(201)
    with batch(sub) as b:
        queued = []
        for case, (low, high) in cases.cases(g, random_bounds=True):
            args = (case["old_logp"], case["rollout_logp"], case["advantages"], case["mask"])
            lp_tis = leaf(case["logp"])
            queued.append((case, low, high, args, lp_tis,
                           b.tis_ppo_loss(lp_tis, *args, tis_low=low, tis_high=high)))
    # while the submission runs: the reference's weights and its gradient with weights 1 (the
    # plain PPO gradient; the submission's own weights and losses are checked in T1)
    expected = []
    for case, low, high, args, _, _ in queued:
        lp_plain = leaf(case["logp"])
        ref.tis_ppo_loss(lp_plain, *args, tis_low=1.0, tis_high=1.0).backward()
        w = ref.tis_weights(case["old_logp"], case["rollout_logp"], case["mask"],
                            clip_low=low, clip_high=high)
        expected.append((w * lp_plain.grad).detach())
    cases.backward_all([q[5].value for q in queued],   # one backward for all the losses
                       [f"tis_ppo_loss with TIS [{q[1]:.3g}, {q[2]:.3g}]" for q in queued])
    for (case, low, high, args, lp_tis, _), want in zip(queued, expected):
        assert_close(lp_tis.grad, want,
                     what=f"d loss / d logp with TIS [{low:.3g}, {high:.3g}] versus w times the "
                     f"gradient with weights 1: the weight must multiply the per-token loss, "
                     f"outside min/clip", inputs=case)


def test_weights_and_frozen_inputs_are_detached(sub):
    logp, old, rollout, adv, mask = _hand_case(F64)
    with batch(sub) as b:
        lp, o, ro, a = leaf(logp), leaf(old), leaf(rollout), leaf(adv)
        pending_w = b.tis_weights(o, ro, mask)
        pending_w_ro = b.tis_weights(old, leaf(rollout), mask)  # only rollout_logp requires grad
        queued = []
        for per_token in (True, False):   # each aggregation is its own code path
            lp, o, ro, a = leaf(logp), leaf(old), leaf(rollout), leaf(adv)
            queued.append((per_token, lp, o, ro, a, b.tis_ppo_loss(lp, o, ro, a, mask, per_token_loss=per_token)))
    w = pending_w.value
    if w.requires_grad:
        raise Feedback("tis_weights returned a tensor that requires grad: the weights are a "
                       "stop-gradient correction (detach them)")
    if pending_w_ro.value.requires_grad:
        raise Feedback("tis_weights returned a tensor that requires grad when only rollout_logp does: "
                       "the weights are detached whichever input requires grad")
    torch.autograd.backward([q[5].value for q in queued])   # independent losses: one pass
    for per_token, lp, o, ro, a, pending_loss in queued:
        assert_no_grad(o, what=f"old_logp (frozen: the PPO ratio's denominator and the TIS numerator; "
                               f"per_token_loss={per_token})")
        assert_no_grad(ro, what=f"rollout_logp (per_token_loss={per_token})")
        assert_no_grad(a, what=f"advantages (per_token_loss={per_token})")
        if lp.grad is None or not bool((lp.grad != 0).any()):
            raise Feedback(f"logp must receive the gradient (per_token_loss={per_token}), got {describe(lp.grad)}")


def test_padding_is_neutralised(sub, oracle, ctx):
    g = ctx.generator(202)
    with batch(sub) as b:
        queued = []
        for p, pad in enumerate((NAN, INF, -INF, 1e30)):
            for d, dtype in enumerate((F32, F64)):
                case = cases.make_case(g, 3, 5, dtype, pad, bool_mask=(dtype == F32), empty_row=True,
                                       bounds=(0.0, 2.0))
                case["mask"][0, 2] = 0  # a hole in the middle of a response, too
                m = case["mask"] != 0
                for k in ("logp", "old_logp", "rollout_logp"):
                    case[k] = torch.where(m, case[k], torch.tensor(pad, dtype=dtype))
                args = (case["old_logp"], case["rollout_logp"], case["advantages"], case["mask"])
                pending_w = b.tis_weights(case["old_logp"], case["rollout_logp"], case["mask"])
                losses = []
                # one aggregation per (padding, dtype): each padding meets both aggregations, and
                # each (dtype, aggregation) two paddings
                for per_token in ((p + d) % 2 == 0,):
                    lp = leaf(case["logp"])
                    losses.append((per_token, lp, b.tis_ppo_loss(lp, *args, per_token_loss=per_token)))
                queued.append((pad, case, m, args, pending_w, losses))
    # the expectations, computed while the submission runs
    expected = [(oracle.tis_weights(case["old_logp"], case["rollout_logp"], case["mask"]),
                 [oracle.tis_ppo_loss(case["logp"], *args, per_token_loss=per_token)
                  for per_token, _, _ in losses])
                for _, case, _, args, _, losses in queued]
    checked = []   # every value first, then one backward for all the losses
    for (pad, case, m, args, pending_w, losses), (want_w, want_losses) in zip(queued, expected):
        w = pending_w.value
        assert_close(w, want_w,
                     what=f"tis_weights with padding {pad} (padded weights must be 0)",
                     inputs=case)
        for (per_token, lp, pending), want in zip(losses, want_losses):
            loss = pending.value
            what = f"tis_ppo_loss with padding {pad} (per_token_loss={per_token})"
            assert_close(loss, want, what=what,
                         hint="neutralise padding with torch.where, never x * mask",
                         hint_when=nonfinite_where_finite, inputs=case)
            checked.append((loss, what, pad, m, lp))
    cases.backward_all([c[0] for c in checked], [c[1] for c in checked])
    for _, _, pad, m, lp in checked:
        assert_exactly_zero(lp.grad[~m], what=f"gradient at padded positions (padding {pad})")


def test_inputs_not_mutated(sub, ctx):
    g = ctx.generator(203)
    case = cases.make_case(g, 3, 4, F32, NAN, bool_mask=False, empty_row=True, bounds=(0.0, 2.0))
    before = {k: v.clone() for k, v in case.items()}
    with batch(sub) as b:
        outs = [b.tis_weights(case["old_logp"], case["rollout_logp"], case["mask"]),
                b.tis_ppo_loss(leaf(case["logp"]), case["old_logp"], case["rollout_logp"],
                               case["advantages"], case["mask"], per_token_loss=False)]
    for out in outs:
        out.get()   # raises what the call raised; the case holds the calls' in-place changes
    for k, v in case.items():
        same = (v == before[k]) | (torch.isnan(v) & torch.isnan(before[k]))
        if not bool(same.all()):
            raise Feedback(f"{k} was modified in place: before {describe(before[k])}, after "
                           f"{describe(v)}. Work on new tensors (torch.where, not masked_fill_)")


@visible
def test_extreme_ratios(sub):
    # rho = exp(+big) overflows to inf -> weight = high; rho = exp(-big) underflows to 0 -> low.
    with batch(sub) as b:
        queued = []
        for dtype, big in ((F64, 1000.0), (F32, 200.0)):
            old = torch.tensor([[big, -big, 0.0]], dtype=dtype)
            rollout = torch.zeros(1, 3, dtype=dtype)
            mask = torch.ones(1, 3, dtype=torch.bool)
            # one bound given, the other left at its default (0 or 2): a solution that reads one
            # bound only when the other is given too is off
            for low, high in ((0.0, 1.5), (0.25, 2.0)):
                wkw = {"clip_high": high} if low == 0.0 else {"clip_low": low}
                lkw = {"tis_" + k[5:]: v for k, v in wkw.items()}
                pending_w = b.tis_weights(old, rollout, mask, **wkw)
                o2 = torch.tensor([[-0.5, -0.5 - big, -0.5]], dtype=dtype)   # log-ratios +big, -big, 0
                r2 = torch.tensor([[-0.5 - big, -0.5, -0.5]], dtype=dtype)
                lp = leaf(o2)                                                   # r = 1 everywhere
                pending_loss = b.tis_ppo_loss(lp, o2, r2, torch.tensor([1.0], dtype=dtype), mask, **lkw)
                queued.append((dtype, big, old, rollout, low, high, lp, pending_w, pending_loss))
    losses = []   # every value first, then one backward for all the losses
    for dtype, big, old, rollout, low, high, lp, pending_w, pending_loss in queued:
        w = pending_w.value
        assert_close(w, torch.tensor([[high, low, 1.0]], dtype=F64),
                     what=f"tis_weights for log-ratios [{big}, {-big}, 0] with bounds "
                     f"[{low}, {high}] ({dtype}): inf clamps to high, 0 to low, no NaN",
                     inputs={"old_logp": old, "rollout_logp": rollout})
        loss = pending_loss.value
        # r = 1 on every token, A = 1: loss = -(high + low + 1) / 3
        assert_close(loss, torch.tensor(-(high + low + 1.0) / 3, dtype=F64),
                     what=f"tis_ppo_loss with behaviour log-ratios [{big}, {-big}, 0] and "
                     f"bounds [{low}, {high}] ({dtype})")
        losses.append((loss, f"tis_ppo_loss with bounds [{low}, {high}] ({dtype})"))
    cases.backward_all([x[0] for x in losses], [x[1] for x in losses])
    for dtype, big, old, rollout, low, high, lp, pending_w, pending_loss in queued:
        if not bool(torch.isfinite(lp.grad).all()):
            raise Feedback(f"gradient must stay finite for huge behaviour ratios, got "
                           f"{describe(lp.grad)}")


def test_tiny_probabilities(sub):
    # A rare token: old = rollout = -120 (float32) or -800 (float64). exp(old) underflows to 0,
    # but rho = exp(old - rollout) = 1. Form the ratio from the log difference.
    with batch(sub) as b:
        queued = []
        for dtype, lv in ((F32, -120.0), (F64, -800.0)):
            old = torch.tensor([[lv, lv + math.log(3.0)]], dtype=dtype)
            rollout = torch.tensor([[lv, lv]], dtype=dtype)
            mask = torch.ones(1, 2, dtype=torch.bool)
            queued.append((dtype, lv, old, rollout, b.tis_weights(old, rollout, mask)))
    for dtype, lv, old, rollout, pending in queued:
        w = pending.value
        assert_close(w, torch.exp((old - rollout).to(F64)).clamp(max=2.0),
                     what=f"tis_weights for log-probs near {lv} ({dtype}): rho = exp(old - "
                     f"rollout), not exp(old) / exp(rollout)",
                     inputs={"old_logp": old, "rollout_logp": rollout})
