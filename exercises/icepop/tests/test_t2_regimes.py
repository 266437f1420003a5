"""T2: value regimes, encodings and defaults the other tiers never generate (issue 17).

Which test covers which class of mistake:
- test_widths_used_as_given: half its calls pass eps_low, eps_high, low, high, per_token_loss by
  position in the spec's order with an int upper bound (a signature with a pair swapped, or an
  isinstance(float) band check); test_t1_oracle passes icepop_weights' band by position likewise.
- test_extreme_ppo_ratios: PPO log-ratios +-25 / +-60 / +-85 (float32), +-25 / +-100 / +-700
  (float64), both signs of A: verl's +-20 log-ratio clamp and SkyRL's safe_exp_delta; a ratio that
  overflows to inf with A > 0 must give the clipped loss and gradient 0, never NaN (also on a
  token the band rejects, w = 0: the overflow guard is not only for kept tokens); probabilities
  e^-110 / e^-800 (exp(a) / exp(b) is 0/0).
- test_dual_clip_is_not_applied: ratios 3.5 and 5 with A < 0 (verl's dual clip c = 3 caps them).
- test_band_ties_on_neighbouring_floats: every float whose exp rounds exactly onto a band bound
  (and the next one outward), per dtype: a log-space comparison misjudges them. The next float
  outward may follow any path of exp (vectorised, 0-d, float64 rounded back to the dtype), so a
  ratio formed in float64 and compared in its own dtype is not falsely rejected.
- test_widths_used_as_given: PPO clip widths 0, > 1, asymmetric, negative (they are not
  validated and are used as given), compared with the oracle, both aggregations.
- test_defaults_apply_when_omitted: a call with every default omitted, on a case where each
  default (band, widths, per_token_loss) changes the value.
- test_mixed_dtypes_and_mask_encodings: float64 advantages and float64 / int64 masks with float32
  log-probs: the loss stays in logp's dtype (spec, "Return requirements").
- test_empty_masks_with_nan_padding: all-empty masks in every encoding with NaN / inf padding,
  and an empty batch (B = 0): a graph-connected 0 and zero gradients, never NaN.
- test_validation_with_empty_masks: bad bands, bad shapes and a 0-d advantage for B = 1 still raise
  ValueError when nothing is valid, under both aggregations, and on an empty batch (B = 0): a
  B = 0 shortcut placed before the checks is shown wrong.
- test_drawn_shapes_match_oracle / test_large_batch_matches_reference: shapes drawn per seed
  (1 x 1, 1 x L, B x 1 and random; one aggregation each, both over the shapes), oracle for the
  small ones, the reference's weights and the oracle's formulas vectorised
  (_cases.closed_form) for one batch with B * L >= 16384 (both aggregations).
"""

import math

import torch

from judge import cases as shared
from judge.testing import Feedback, assert_close, batch, check_connected_zero, check_tensor, describe, expect_raises, leaf, sibling

cases = sibling(__file__, "_cases")
F32, F64 = torch.float32, torch.float64
NAN, INF = float("nan"), float("inf")


def _rows(rows, dtype):
    """One response per row, one token each: row i has PPO log-ratio log_r, behaviour log-ratio
    log_rho, advantage a (old = -max(1, log_r), so logp = old + log_r <= 0)."""
    old = torch.tensor([[-max(1.0, lr)] for lr, _, _ in rows], dtype=F64)
    logp = old + torch.tensor([[lr] for lr, _, _ in rows], dtype=F64)
    rollout = old - torch.tensor([[lrho] for _, lrho, _ in rows], dtype=F64)
    adv = torch.tensor([a for _, _, a in rows], dtype=dtype)
    return (logp.to(dtype), old.to(dtype), rollout.to(dtype), adv,
            torch.ones(len(rows), 1, dtype=torch.bool))


def test_extreme_ppo_ratios(sub, oracle):
    # One call per (dtype, magnitude); seq-mean-token-mean over one-token responses, so each
    # row's gradient shows its own regime.
    groups = []  # (dtype, magnitude, rows)
    for dtype in (F32, F64):
        for mag in shared.EXTREME_LOG_RATIOS[dtype]:
            rows = [(sign * mag, 0.0, a) for sign in (1.0, -1.0) for a in (1.5, -0.75)]
            groups.append((dtype, mag, rows + [(mag, 5.0, -1.0)]))  # + a rejected token, huge r
        for mag in shared.OVERFLOW_LOG_RATIOS[dtype]:
            # r = inf with A > 0 (clipped: gradient exactly 0; A = 0.5 and 2), r = 0 with A > 0 and
            # A < 0, and r = inf with A > 0 on a token the band rejects (rho = e^5, w = 0): its
            # gradient is 0 too, never 0 * inf = NaN (an overflow guard applied to kept tokens only)
            groups.append((dtype, mag, [(mag, 0.0, 0.5), (mag, 0.0, 2.0), (-mag, 0.0, 2.0), (-mag, 0.0, -2.0),
                                        (mag, 5.0, 1.0)]))
    with batch(sub) as b:
        calls = []
        for dtype, mag, rows in groups:
            args = _rows(rows, dtype)
            lp = leaf(args[0])
            calls.append((dtype, mag, rows, args, lp,
                          b.icepop_ppo_loss(lp, *args[1:], per_token_loss=False)))
        for dtype in (F32, F64):
            t = shared.TINY_LOGP[dtype]  # exp underflows to 0: a probability quotient is 0/0
            old = torch.tensor([[t, t, t + 0.3]], dtype=dtype)
            logp = old + torch.tensor([[0.1, -0.1, 0.05]], dtype=dtype)
            rollout = old - torch.tensor([[0.2, 0.0, -0.4]], dtype=dtype)
            adv, mask = torch.tensor([1.0], dtype=dtype), torch.ones(1, 3, dtype=torch.bool)
            lp = leaf(logp)
            calls.append((dtype, t, None, (logp, old, rollout, adv, mask), lp,
                          b.icepop_ppo_loss(lp, old, rollout, adv, mask, per_token_loss=False)))
    checked = []   # every loss first, then one backward for all of them, then the gradients
    for dtype, mag, rows, args, lp, pending in calls:
        shown = dict(zip(("logp", "old_logp", "rollout_logp", "advantages", "mask"), args))
        if rows is None:
            what = (f"icepop_ppo_loss with log-probs near {mag} ({dtype}): exp(logp) underflows "
                    f"to 0, so form both ratios from log differences")
            rtol, atol = None, None
        else:
            what = (f"icepop_ppo_loss with one-token responses (PPO log-ratio, behaviour log-ratio, "
                    f"A) = {rows} ({dtype}): r = exp(logp - old_logp) with no +-20 clamp; a token "
                    f"with A > 0 whose r overflows is clipped, with gradient exactly 0")
            rtol, atol = shared.scaled_tolerance(dtype, mag)
        loss = check_tensor(pending.value, what=what, shape=(), dtype=dtype)
        assert_close(loss, oracle.icepop_ppo_loss(*args, per_token_loss=False), what=what,
                     rtol=rtol, atol=atol, inputs=shown)
        checked.append((loss, what, args, lp, shown, rtol, atol))
    cases.backward_all([c[0] for c in checked], [c[1] for c in checked])
    for _, what, args, lp, shown, rtol, atol in checked:
        grad = lp.grad if lp.grad is not None else torch.zeros_like(lp)
        if not bool(torch.isfinite(grad).all()):
            raise Feedback(f"{what}: the gradient must be finite (exp's backward multiplies by "
                           f"r = inf: keep clipped tokens off the differentiable path), got "
                           f"{describe(grad)}")
        assert_close(grad, oracle.icepop_ppo_loss_grad(*args, per_token_loss=False),
                     what=f"d loss / d logp, {what}", rtol=rtol, atol=atol, inputs=shown)


def test_dual_clip_is_not_applied(sub, oracle):
    # A < 0 and r = 3.5, 5: the loss is -r A (PPO's pessimistic branch), not verl's dual-clip cap
    # -3 A; gradient -A r / N on those tokens.
    with batch(sub) as b:
        calls = []
        for dtype in (F64, F32):
            old = torch.full((2, 3), -2.0, dtype=dtype)
            r = torch.tensor([[3.5, 5.0, 1.0], [5.0, 0.5, 3.5]], dtype=F64)
            logp = old + torch.log(r).to(dtype)
            rollout = old.clone()
            adv = torch.tensor([-1.0, -0.5], dtype=dtype)
            mask = torch.ones(2, 3, dtype=torch.bool)
            for per_token in (True, False):
                lp = leaf(logp)
                calls.append((dtype, per_token, (logp, old, rollout, adv, mask), lp,
                              b.icepop_ppo_loss(lp, old, rollout, adv, mask, per_token_loss=per_token)))
    checked = []   # every loss first, then one backward for all of them, then the gradients
    for dtype, per_token, args, lp, pending in calls:
        shown = dict(zip(("logp", "old_logp", "rollout_logp", "advantages", "mask"), args))
        what = (f"icepop_ppo_loss with ratios 3.5 and 5 and negative advantages (per_token_loss="
                f"{per_token}, {dtype}): no dual clip (verl's c = 3 is not part of this loss)")
        loss = pending.value
        assert_close(loss, oracle.icepop_ppo_loss(*args, per_token_loss=per_token), what=what, inputs=shown)
        checked.append((loss, what, per_token, args, lp, shown))
    cases.backward_all([c[0] for c in checked], [c[1] for c in checked])
    for _, what, per_token, args, lp, shown in checked:
        assert_close(lp.grad, oracle.icepop_ppo_loss_grad(*args, per_token_loss=per_token),
                     what=f"d loss / d logp, {what}", inputs=shown)


def _outward(x: torch.Tensor, up: bool) -> torch.Tensor:
    return torch.nextafter(x, torch.tensor(INF if up else -INF, dtype=x.dtype))


def test_band_ties_on_neighbouring_floats(sub):
    # For each bound, the smallest and largest log-ratio whose exp is exactly the bound (kept),
    # and the next float outward (its exp is beyond the bound: rejected). The expected weight is
    # computed here from exp in the tensor's dtype, as the spec says rho is formed and compared.
    with batch(sub) as b:
        calls = []
        for dtype in (F32, F64):
            for low, high in ((0.5, 2.0), (0.8, 1.2), (0.8, 1.28)):
                lo_a, lo_b = shared.onto_bound(low, dtype)
                hi_a, hi_b = shared.onto_bound(high, dtype)
                xs = torch.stack([lo_a, lo_b, _outward(lo_a, up=False), hi_a, hi_b, _outward(hi_b, up=True)])
                old = xs[None]
                rollout = torch.zeros_like(old)
                mask = torch.ones(1, 6, dtype=torch.bool)
                calls.append((dtype, low, high, old, rollout,
                              b.icepop_weights(old, rollout, mask, low=low, high=high)))
    for dtype, low, high, old, rollout, w in calls:
        rho = torch.exp(old - rollout)
        keep = (rho >= low) & (rho <= high)
        want = torch.where(keep, rho, torch.zeros_like(rho))
        if not bool(keep[0, [0, 1, 3, 4]].all()) or bool(keep[0, [2, 5]].any()):
            raise AssertionError("test construction: the bound neighbours are not where expected")
        shown = {"old_logp": old, "rollout_logp": rollout, "exp(old_logp - rollout_logp)": rho}
        what = (f"icepop_weights with band [{low}, {high}] on the floats whose exp(old - rollout) is "
                f"exactly a bound (kept) and the next ones outward (rejected) ({dtype}): compare the "
                f"ratio itself with the bounds in its dtype, not the log-ratio with log(bound)")
        got = w.value
        # The kept floats land on the bound on every path torch's exp may take (onto_bound), but
        # the next float outward may still round onto it on another path: exp of 0-d elements
        # (a loop) or exp in float64 rounded back to the dtype (the correctly rounded ratio, a
        # stable formulation compared in its own dtype, which the spec allows). Each element
        # may follow any one of these paths; the kept points are unchanged (all paths agree).
        alts = [want]
        for r in (torch.stack([torch.exp(v) for v in (old - rollout)[0]])[None],
                  torch.exp(old.double() - rollout.double()).to(dtype)):
            alts.append(torch.where((r >= low) & (r <= high), r, torch.zeros_like(r)))
        if (isinstance(got, torch.Tensor) and got.shape == want.shape and got.dtype == dtype
                and bool(torch.stack([got == a for a in alts]).any(0).all())):
            continue
        assert_close(got, want, what=what, rtol=0, atol=0, inputs=shown)


def test_widths_used_as_given(sub, oracle, ctx):
    # PPO clip widths are not validated: 0, > 1 and asymmetric ones are used as given.
    g = ctx.generator(301)
    # ... negative ones included (clip(r, 1.1, 1.3) and clip(r, 0.7, 0.9)): a check eps >= 0
    # copied from other losses raises where the spec says nothing is validated
    widths = [(0.0, 0.0), (1.5, 0.1), (0.35, 3.0), (0.1, 0.05), (0.05, 0.6), (-0.1, 0.3), (0.3, -0.1)]
    with batch(sub) as b:
        calls = []
        for i, (el, eh) in enumerate(widths):
            dtype = (F64, F32)[i % 2]
            # a wide band keeps most tokens, so every width shows in many of them
            case = cases.make_case(g, 4, 8, dtype, cases.PADS[i % 4], bool_mask=i % 2 == 0,
                                   empty_row=True, bounds=(0.1, 10.0), eps=(el, eh), r_range=1.6)
            args = (case["old_logp"], case["rollout_logp"], case["advantages"], case["mask"])
            # the zero widths under both aggregations, the others under one each: each
            # aggregation meets both dtypes, zero widths and a width > 1
            for per_token in ((True, False), (False,), (True,), (True,), (False,), (True,), (False,))[i]:
                lp = leaf(case["logp"])
                if i % 2:
                    # by position, in the spec's order, with an int upper bound: a signature with
                    # eps_low/eps_high or low/high swapped (or the pairs swapped) is only visible
                    # here, and an int band edge is a legal number
                    kw = dict(eps_low=el, eps_high=eh, low=0.1, high=10, per_token_loss=per_token)
                    pending = b.icepop_ppo_loss(lp, *args, el, eh, 0.1, 10, per_token)
                else:
                    kw = dict(eps_low=el, eps_high=eh, low=0.1, high=10.0, per_token_loss=per_token)
                    pending = b.icepop_ppo_loss(lp, *args, **kw)
                calls.append((case, args, kw, lp, pending))
    checked = []   # every loss first, then one backward for all of them, then the gradients
    for case, args, kw, lp, pending in calls:
        what = f"icepop_ppo_loss({', '.join(f'{k}={v}' for k, v in kw.items())}) (widths used as given)"
        loss = pending.value
        assert_close(loss, oracle.icepop_ppo_loss(case["logp"], *args, **kw), what=what, inputs=case)
        checked.append((loss, what, case, args, kw, lp))
    cases.backward_all([c[0] for c in checked], [c[1] for c in checked])
    for _, what, case, args, kw, lp in checked:
        assert_close(lp.grad, oracle.icepop_ppo_loss_grad(case["logp"], *args, **kw),
                     what=f"d loss / d logp, {what}", inputs=case)


def test_defaults_apply_when_omitted(sub, oracle):
    # rho [0.45, 0.55, 1.9, 2.1] straddles the default band [0.5, 2]; r [0.5, 1.5, 1.1, 0.7] with
    # A = +-1 engages both default widths (0.2, 0.2); rows of 4 and 1 valid tokens separate the
    # default token-mean from seq-mean-token-mean.
    with batch(sub) as b:
        calls = []
        for dtype in (F64, F32):
            rho = torch.tensor([[0.45, 0.55, 1.9, 2.1], [1.0, 0.6, 1.5, 1.2]], dtype=F64)
            r = torch.tensor([[0.5, 1.5, 1.1, 0.7], [0.5, 1.0, 1.0, 1.0]], dtype=F64)
            old = torch.full((2, 4), -1.5, dtype=F64)
            mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.bool)
            args = tuple(shared.pad(x, mask, NAN).to(dtype)
                         for x in (old + r.log(), old, old - rho.log()))
            adv = torch.tensor([1.0, -1.0], dtype=dtype)
            lp = leaf(args[0])
            calls.append((dtype, args + (adv, mask), lp, b.icepop_ppo_loss(lp, *args[1:], adv, mask),
                          b.icepop_weights(args[1], args[2], mask)))
    checked = []   # every value first, then one backward for all the losses
    for dtype, args, lp, loss, w in calls:
        shown = dict(zip(("logp", "old_logp", "rollout_logp", "advantages", "mask"), args))
        assert_close(w.value, oracle.icepop_weights(args[1], args[2], args[4]), inputs=shown,
                     what=f"icepop_weights with the default band (low=0.5, high=2.0) ({dtype})")
        loss = loss.value
        what = (f"icepop_ppo_loss with every default omitted (band [0.5, 2], eps 0.2 / 0.2, "
                f"per_token_loss=True) ({dtype})")
        assert_close(loss, oracle.icepop_ppo_loss(*args), what=what, inputs=shown)
        checked.append((loss, what, args, lp, shown))
    cases.backward_all([c[0] for c in checked], [c[1] for c in checked])
    for _, what, args, lp, shown in checked:
        assert_close(lp.grad, oracle.icepop_ppo_loss_grad(*args), what=f"d loss / d logp, {what}",
                     inputs=shown)


def test_mixed_dtypes_and_mask_encodings(sub, oracle, ctx):
    g = ctx.generator(302)
    with batch(sub) as b:
        calls = []
        for i, kind in enumerate(shared.MASK_KINDS):
            case = shared.token_case(g, 3, 4, F32, mask_kind=kind, fill=shared.PADS[i], empty_rows=1)
            adv64 = case["advantages"].to(F64) + 0.1  # float64 advantages with float32 log-probs
            args = (case["old_logp"], case["rollout_logp"], adv64, case["mask"])
            losses = []
            for per_token in (True, False):
                lp = leaf(case["logp"])
                losses.append((per_token, lp, b.icepop_ppo_loss(lp, *args, per_token_loss=per_token)))
            calls.append((kind, case, args, b.icepop_weights(case["old_logp"], case["rollout_logp"],
                                                             case["mask"]), losses))
    checked = []   # every value first, then one backward for all the losses
    for kind, case, args, w, losses in calls:
        shown = {**{k: case[k] for k in ("logp", "old_logp", "rollout_logp", "mask")}, "advantages": args[2]}
        w = check_tensor(w.value, what=f"icepop_weights with a {kind} mask and float32 log-probs",
                         shape=(3, 4), dtype=F32)
        assert_close(w, oracle.icepop_weights(case["old_logp"], case["rollout_logp"], case["mask"]),
                     what=f"icepop_weights with a {kind} mask", inputs=shown)
        for per_token, lp, pending in losses:
            what = (f"icepop_ppo_loss with float32 log-probs, float64 advantages and a {kind} mask "
                    f"(per_token_loss={per_token}): the loss is in logp's dtype")
            loss = check_tensor(pending.value, what=what, shape=(), dtype=F32)
            assert_close(loss, oracle.icepop_ppo_loss(case["logp"], *args, per_token_loss=per_token),
                         what=what, inputs=shown)
            checked.append((loss, what, case, args, per_token, lp, shown))
    cases.backward_all([c[0] for c in checked], [c[1] for c in checked])
    for _, what, case, args, per_token, lp, shown in checked:
        assert_close(lp.grad, oracle.icepop_ppo_loss_grad(case["logp"], *args, per_token_loss=per_token),
                     what=f"d loss / d logp, {what}", inputs=shown)


def test_empty_masks_with_nan_padding(sub):
    with batch(sub) as b:
        calls = []
        for i, kind in enumerate(shared.MASK_KINDS):
            dtype = shared.DTYPES[i % 2]
            for B in (3, 0):  # B = 0: an empty batch
                fill = shared.PADS[(i + B) % len(shared.PADS)]
                full = lambda v: torch.full((B, 4), v, dtype=dtype)  # noqa: E731
                logp, old, rollout = full(fill), full(fill), full(-fill if fill == fill else fill)
                mask = shared.as_mask(torch.zeros(B, 4, dtype=torch.bool), kind)
                adv = torch.ones(B, dtype=dtype)
                # B = 3 under both aggregations; B = 0 (nothing to aggregate) under one per mask
                # kind, alternating, so each aggregation meets an empty batch twice
                for per_token in ((True, False) if B else (i % 2 == 0,)):
                    lp = leaf(logp)
                    calls.append((dtype, kind, B, fill, per_token, lp, b.icepop_ppo_loss(
                        lp, old, rollout, adv, mask, per_token_loss=per_token)))
                calls.append((dtype, kind, B, fill, None, None, b.icepop_weights(old, rollout, mask)))
    for dtype, kind, B, fill, per_token, lp, pending in calls:
        if per_token is None:
            w = check_tensor(pending.value, what=f"icepop_weights with an all-empty {kind} mask and "
                             f"padding {fill} (B = {B})", shape=(B, 4), dtype=dtype)
            if not bool((w == 0).all()):
                raise Feedback(f"icepop_weights with an all-empty {kind} mask and padding {fill} must be "
                               f"all 0, got {describe(w)}")
            continue
        what = (f"icepop_ppo_loss with an all-empty {kind} mask, every log-prob {fill} (padding), "
                f"B = {B}, per_token_loss={per_token}, {dtype}")
        check_connected_zero(pending.value, what=what, dtype=dtype, leaves={"logp": lp},
                             why="padding is never read: logp * 0 is NaN for NaN padding; B = 0 "
                                 "responses divide by max(1, B)")


def test_validation_with_empty_masks(sub):
    # Validation runs before anything else: an all-empty mask does not skip it.
    # Nor does an empty batch (B = 0, legal): under per_token_loss=False the NaN-band and the
    # advantages [B, 1] rows are on a [0, 3] batch, so a B = 0 shortcut placed before the checks
    # is shown wrong (the empty [2, 3] mask keeps the other rows).
    logp = torch.full((2, 3), NAN, dtype=F64)
    empty = torch.zeros(2, 3, dtype=torch.bool)
    adv = torch.zeros(2, dtype=F64)
    with batch(sub) as b:
        calls = []
        for per_token in (True, False):
            for low, high in ((-0.1, 2.0), (2.5, 2.0), (0.0, math.inf), (0.0, 0.0), (math.nan, 2.0)):
                n = 0 if (not per_token and low != low) else 2
                calls.append((f"icepop_ppo_loss(low={low}, high={high}, per_token_loss={per_token}) "
                              f"with an all-empty mask" + (" and B = 0" if n == 0 else ""),
                              b.icepop_ppo_loss(logp[:n], logp[:n], logp[:n], adv[:n], empty[:n],
                                                low=low, high=high, per_token_loss=per_token)))
            n = 2 if per_token else 0
            calls.append((f"icepop_ppo_loss with advantages [B, 1] and an all-empty mask "
                          f"(per_token_loss={per_token}, B = {n})",
                          b.icepop_ppo_loss(logp[:n], logp[:n], logp[:n], adv[:n, None], empty[:n],
                                            per_token_loss=per_token)))
            calls.append((f"icepop_ppo_loss with a [2, 2] rollout_logp and an all-empty mask "
                          f"(per_token_loss={per_token})",
                          b.icepop_ppo_loss(logp, logp, logp[:, :2], adv, empty, per_token_loss=per_token)))
            one = torch.full((1, 3), -1.0, dtype=F64)
            calls.append((f"icepop_ppo_loss with B = 1 and a 0-d advantage (must be shape [1]; "
                          f"per_token_loss={per_token})",
                          b.icepop_ppo_loss(one, one, one, torch.tensor(1.0, dtype=F64),
                                            torch.ones(1, 3, dtype=torch.bool), per_token_loss=per_token)))
        for low, high in ((-0.1, 2.0), (0.0, math.nan)):
            n = 2 if low < 0 else 0   # the NaN bound on an empty batch (B = 0)
            calls.append((f"icepop_weights(low={low}, high={high}) with an all-empty mask (B = {n})",
                          b.icepop_weights(logp[:n], logp[:n], empty[:n], low=low, high=high)))
        calls.append(("icepop_weights with a [2, 2] mask and an all-empty mask",
                      b.icepop_weights(logp, logp, empty[:, :2])))
    for what, pending in calls:
        expect_raises(ValueError, pending.get, what=what)


def _drawn_case(g, B, L, i):
    dtype = shared.DTYPES[i % 2]
    kind = shared.MASK_KINDS[i % len(shared.MASK_KINDS)]
    bounds = ((0.5, 2.0), (0.2, 3.0), (0.0, 1.5))[i % 3]
    case = cases.make_case(g, B, L, dtype, shared.PADS[i % len(shared.PADS)], bool_mask=True,
                           empty_row=i % 2 == 1, bounds=bounds, r_range=1.2)
    case["mask"] = shared.as_mask(case["mask"], kind)
    return case, bounds


def _queue_all(b, case, bounds, large=False, aggregations=(True, False)):
    low, high = bounds
    args = (case["old_logp"], case["rollout_logp"], case["advantages"], case["mask"])
    out = [] if large else [("weights", None, b.icepop_weights(
        case["old_logp"], case["rollout_logp"], case["mask"], low=low, high=high))]
    for per_token in aggregations:
        lp = leaf(case["logp"])
        out.append((per_token, lp, b.icepop_ppo_loss(lp, *args, low=low, high=high,
                                                     per_token_loss=per_token)))
    return args, out


def _check_all(expect, case, bounds, args, queued, label, checked):
    """Check the weights and the losses of ``queued`` (``expect(kw)``: the trusted (loss, grad)
    for the loss's keywords, or the weights for kw None); the losses go to ``checked`` (loss,
    what, leaf, expected grad, shown), whose gradients ``_check_grads`` reads after one backward."""
    low, high = bounds
    shown = {k: case[k] for k in ("logp", "old_logp", "rollout_logp", "advantages", "mask")}
    for per_token, lp, pending in queued:
        if per_token == "weights":
            assert_close(pending.value, expect(None),
                         what=f"icepop_weights(low={low}, high={high}) on {label}", inputs=shown)
            continue
        kw = dict(low=low, high=high, per_token_loss=per_token)
        what = f"icepop_ppo_loss(low={low}, high={high}, per_token_loss={per_token}) on {label}"
        want, want_grad = expect(kw)   # before reading the answer: while the submission runs
        loss = pending.value
        assert_close(loss, want, what=what, inputs=shown)
        checked.append((loss, what, lp, want_grad, shown))


def _check_grads(checked):
    """One backward for all the losses ``_check_all`` collected, then each gradient."""
    cases.backward_all([c[0] for c in checked], [c[1] for c in checked])
    for _, what, lp, want_grad, shown in checked:
        assert_close(lp.grad, want_grad, what=f"d loss / d logp, {what}", inputs=shown)


def test_drawn_shapes_match_oracle(sub, oracle, ctx):
    g = ctx.generator(303)
    with batch(sub) as b:
        runs = []
        for i, (B, L) in enumerate(shared.shapes(g, large=False)):
            case, bounds = _drawn_case(g, B, L, i)
            # one aggregation per shape, in pairs (T T F F T F): each aggregation meets both
            # dtypes, several mask kinds and bands (T1's fixed sizes, the corners included, and
            # the large batch have both aggregations)
            runs.append((B, L, case, bounds,
                         *_queue_all(b, case, bounds, aggregations=((i // 2) % 2 == 0,))))
    checked = []
    for B, L, case, bounds, args, queued in runs:
        low, high = bounds

        def expect(kw, case=case, args=args, low=low, high=high):
            if kw is None:
                return oracle.icepop_weights(*args[:2], args[3], low=low, high=high)
            return (oracle.icepop_ppo_loss(case["logp"], *args, **kw),
                    oracle.icepop_ppo_loss_grad(case["logp"], *args, **kw))

        _check_all(expect, case, bounds, args, queued,
                   f"[{B}, {L}] {case['logp'].dtype}, {case['mask'].dtype} mask", checked)
    _check_grads(checked)


def test_large_batch_matches_reference(sub, ref, ctx):
    g = ctx.generator(304)
    B, L = shared.shapes(g)[-1]
    case, bounds = _drawn_case(g, B, L, int(torch.randint(0, 6, (), generator=g)))

    with batch(sub) as b:
        args, queued = _queue_all(b, case, bounds, large=True)

    # while the submission runs: the reference's weights (its native-dtype band decisions) and,
    # from one vectorised pass without autograd, both aggregations' losses and gradients
    # (_cases.closed_form: the oracle's formulas on 16k tokens, where its scalar loop is slow)
    low, high = bounds
    want = cases.closed_form(ref.icepop_weights(args[0], args[1], args[3], low=low, high=high),
                             case["logp"], args[0], args[2], args[3])

    def expect(kw):
        return want[kw["per_token_loss"]]

    checked = []
    _check_all(expect, case, bounds, args, queued,
               f"a large batch [{B}, {L}] ({case['logp'].dtype}, {case['mask'].dtype} mask)", checked)
    _check_grads(checked)
