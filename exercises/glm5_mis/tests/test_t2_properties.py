"""T2: strict endpoints, detachment, padding, extremes, the denominator, no mutation,
native-dtype comparison and the hand-checked case.

Which test covers which class (issue 17):
- exact ties at the bounds: test_strict_endpoints, test_native_dtype_comparison (the float on the
  bound and its neighbour; a log-space comparison misjudges the neighbours whose exp rounds onto
  the bound), test_hand_checked_case.
- overflow: test_extreme_log_ratios (+-1000 and +-100 in both dtypes; and, with a window wide
  enough to keep them, log-ratios of +-21 to 690, which a clamped log-ratio gets wrong).
- padding: test_padding_with_nan_inf_and_huge_values; detachment:
  test_weights_and_rollout_and_advantages_are_detached (weights detached also when only
  rollout_logp requires grad); denominator:
  test_denominator_counts_rejected_tokens.
- mutation in every branch: test_inputs_are_not_mutated (every fill, both dtypes, an all-empty
  mask); every other call is also checked by the read-only inputs of judge.readonly.
"""

import math

import torch

from judge import cases as jc
from judge.testing import (Feedback, assert_close, assert_no_grad, batch, check_tensor, describe, leaf,
                           nonfinite_where_finite, sibling, visible)

cases = sibling(__file__, "_cases")
DTYPES = (torch.float32, torch.float64)
LOG2 = math.log(2.0)


def _t(values, dtype):
    return torch.tensor(values, dtype=dtype)


def _exactly_zero(t, where, what):
    """Fail unless t is exactly 0 at the boolean positions ``where`` (and finite everywhere)."""
    if not bool(torch.isfinite(t).all()):
        raise Feedback(f"{what}: expected finite values everywhere, got {describe(t)}")
    if bool((t[where] != 0).any()):
        raise Feedback(f"{what}: expected exactly 0 at {where.nonzero().tolist()}, got {describe(t)}")


@visible
def test_hand_checked_case(sub):
    # clip_low=0.5, clip_high=1.0 -> bounds 0.5 and 2.0; log-ratios [0, log 2, -log 2, log 1.1]; A = 2.
    queued = []
    with batch(sub) as b:
        for dtype in DTYPES:
            logp = _t([[-1.0, -0.5, -2.0, -0.3]], dtype)
            rollout = logp - _t([[0.0, LOG2, -LOG2, math.log(1.1)]], dtype)
            ratio = torch.exp(logp - rollout)
            # Setup checks in this dtype: ratio 2 lands exactly on the upper bound, the third on or below 0.5.
            assert float(ratio[0, 1]) == 2.0 and float(ratio[0, 2]) <= 0.5, ratio
            mask = torch.ones(1, 4, dtype=torch.bool)
            adv = _t([2.0], dtype)
            lp = leaf(logp)
            if dtype == DTYPES[0]:
                calls = (b.masked_is_weights(logp, rollout, mask, clip_low=0.5, clip_high=1.0),
                         b.offpolicy_loss(lp, rollout, adv, mask, clip_low=0.5, clip_high=1.0))
            else:  # by position in the spec's order, clip_high as the int 1 (a legal width): a
                # signature with the widths swapped, or an isinstance(float) check, fails here
                calls = (b.masked_is_weights(logp, rollout, mask, 0.5, 1),
                         b.offpolicy_loss(lp, rollout, adv, mask, 0.5, 1))
            queued.append((dtype, logp, rollout, mask, adv, lp) + calls)
    for dtype, logp, rollout, mask, adv, lp, w, loss in queued:
        shown = {"logp": logp, "rollout_logp": rollout, "advantages": adv, "mask": mask,
                 "clip_low": 0.5, "clip_high": 1.0}
        w = w.value
        check_tensor(w, what="masked_is_weights", shape=(1, 4), dtype=dtype)
        assert_close(w, _t([[1.0, 0.0, 0.0, 1.1]], torch.float64),
                     what=f"hand-checked weights ({dtype}; ratios [1, 2, 0.5, 1.1] with bounds 0.5 and 2.0: "
                          f"both endpoints are rejected)", inputs=shown)
        loss = loss.value
        check_tensor(loss, what="offpolicy_loss", shape=(), dtype=dtype)
        assert_close(loss, torch.tensor(0.665, dtype=torch.float64),
                     what=f"hand-checked loss ({dtype}): -(1*2*(-1) + 1.1*2*(-0.3)) / 4 = 0.665 "
                          f"(the two rejected tokens still count in the denominator 4)", inputs=shown)
        loss.backward()
        assert_close(lp.grad, _t([[-0.5, 0.0, 0.0, -0.55]], torch.float64),
                     what=f"hand-checked dL/dlogp ({dtype}) = -w A / 4", inputs=shown)


@visible
def test_strict_endpoints(sub):
    # rollout = 0 and logp = +-log 2: exp gives exactly 2.0 and 0.5 in float32 and float64.
    queued = []
    with batch(sub) as b:
        for dtype in DTYPES:
            logp = _t([[LOG2, -LOG2, 0.0, 0.5 * LOG2]], dtype)
            rollout = torch.zeros(1, 4, dtype=dtype)
            ratio = torch.exp(logp - rollout)
            assert ratio[0, :3].tolist() == [2.0, 0.5, 1.0], ratio  # setup: exact endpoints in this dtype
            mask = torch.ones(1, 4, dtype=torch.bool)
            lp = leaf(logp)
            queued.append((dtype, logp, rollout, ratio, mask, lp,
                           b.masked_is_weights(logp, rollout, mask, clip_low=0.5, clip_high=1.0),
                           b.offpolicy_loss(lp, rollout, _t([1.0], dtype), mask, clip_low=0.5, clip_high=1.0)))
    for dtype, logp, rollout, ratio, mask, lp, w, loss in queued:
        shown = {"logp": logp, "rollout_logp": rollout, "mask": mask, "clip_low": 0.5, "clip_high": 1.0}
        w = w.value
        check_tensor(w, what="masked_is_weights", shape=(1, 4), dtype=dtype)
        expected = _t([[0.0, 0.0, 1.0, float(ratio[0, 3])]], torch.float64)
        assert_close(w, expected, what=f"weights at ratios [2, 0.5, 1, sqrt 2] with bounds 0.5 and 2.0 ({dtype}): "
                                       f"the interval is OPEN, a ratio on an endpoint gets weight 0 "
                                       f"(use > and <, not >= and <=)", inputs=shown)
        loss = loss.value
        loss.backward()
        assert_close(lp.grad, -expected / 4, what=f"dL/dlogp with ratios [2, 0.5, 1, sqrt 2] ({dtype}): "
                                                  f"endpoint tokens get no gradient", inputs=shown)


def test_native_dtype_comparison(sub):
    """A float32 ratio equal to float32(0.8) is ON the lower bound for clip_low=0.2 (it is above the
    float64 number 0.8); a float64 ratio equal to 1.2 is on the upper bound (float32(1.2) is above it);
    in float32 the bounds are float32(1 - clip_low) and float32(1 + clip_high), which for 0.16 and
    0.18 are one float below 1 - float32(0.16) and 1 + float32(0.18)."""
    # (dtype, bound, clip_low, clip_high, why). The last two: widths whose float32 value is off
    # by enough that 1 - float32(0.16) = 0.8400000334 and 1 + float32(0.18) = 1.1800000668 are
    # one float32 above float32(0.84) = 0.8399999738 and float32(1.18) = 1.1799999475, the bounds.
    checks = [(torch.float32, 0.8, 0.2, 0.2, "float32(0.8) = 0.800000011920929 is the lower bound itself: "
                                             "compare in float32, not after upcasting the ratio to float64"),
              (torch.float32, 1.2, 0.2, 0.2, "float32(1.2) is the upper bound itself"),
              (torch.float64, 1.2, 0.2, 0.2, "1.2 is the upper bound itself: do not build the bounds as float32 "
                                             "tensors (float32(1.2) = 1.2000000476837158 > 1.2)"),
              (torch.float64, 0.8, 0.2, 0.2, "0.8 is the lower bound itself"),
              (torch.float32, 0.84, 0.16, 0.2, "the lower bound is float32(1 - 0.16) = 0.8399999737739563, "
                                               "not 1 - float32(0.16) = 0.8400000333786011: form 1 - clip_low "
                                               "with Python floats, then compare (torch casts it)"),
              (torch.float32, 1.18, 0.2, 0.18, "the upper bound is float32(1 + 0.18) = 1.1799999475479126, "
                                               "not 1 + float32(0.18) = 1.1800000667572021: form 1 + clip_high "
                                               "with Python floats, then compare (torch casts it)")]
    queued = []
    with batch(sub) as b:
        for dtype, target, cl, ch, why in checks:
            x = float(jc.exact_log(target, dtype))
            inside = float(jc.exact_log(float(torch.nextafter(_t(target, dtype), _t(1.0, dtype))), dtype))
            logp = _t([[x, inside]], dtype)
            rollout = torch.zeros(1, 2, dtype=dtype)
            r = torch.exp(logp - rollout)
            assert float(r[0, 0]) == cases.exact_ratio_value(target, dtype), r  # setup
            mask = torch.ones(1, 2, dtype=torch.bool)
            queued.append((logp, rollout, r, mask,
                           b.masked_is_weights(logp, rollout, mask, clip_low=cl, clip_high=ch)))
    for (dtype, target, cl, ch, why), (logp, rollout, r, mask, w) in zip(checks, queued):
        w = w.value
        check_tensor(w, what="masked_is_weights", shape=(1, 2), dtype=dtype)
        shown = {"logp": logp, "rollout_logp": rollout, "mask": mask, "clip_low": cl, "clip_high": ch}
        assert_close(w, _t([[0.0, float(r[0, 1])]], torch.float64), rtol=0, atol=0,
                     what=f"{dtype} weights at the ratios [{float(r[0, 0])!r}, {float(r[0, 1])!r}] "
                          f"(the endpoint, then its neighbour just inside): {why}", inputs=shown)


@visible
def test_weights_and_rollout_and_advantages_are_detached(sub, ctx):
    g = ctx.generator(20)
    queued = []
    with batch(sub) as b:
        for dtype in DTYPES:
            x = cases.random_case(g, 3, 4, dtype, bool_mask=True, pad_fill=None, log_ratio_scale=0.2)
            lp, ro, adv = leaf(x["logp"]), leaf(x["rollout_logp"]), leaf(x["advantages"])
            queued.append((dtype, x, lp, ro, adv, b.masked_is_weights(lp, ro, x["mask"]),
                           b.offpolicy_loss(lp, ro, adv, x["mask"]),
                           b.masked_is_weights(x["logp"], ro, x["mask"])))  # only rollout_logp requires grad
    for dtype, x, lp, ro, adv, w, loss, wd in queued:
        w = w.value
        if w.requires_grad:
            raise Feedback(f"masked_is_weights must return detached weights (sg[r 1(...)]), but the result "
                           f"requires grad when logp and rollout_logp do ({dtype})")
        loss = loss.value
        loss.backward()
        assert_no_grad(ro, what=f"rollout_logp ({dtype})")
        assert_no_grad(adv, what=f"advantages ({dtype})")
        wd = wd.value
        if wd.requires_grad:
            raise Feedback(f"masked_is_weights must return detached weights whichever input requires grad, "
                           f"but the result requires grad when only rollout_logp does ({dtype})")
        wd = wd.to(torch.float64)
        n = max(1, int((x["mask"] != 0).sum()))
        expected = -wd * x["advantages"].to(torch.float64)[:, None] / n
        assert_close(lp.grad, expected,
                     what=f"dL/dlogp ({dtype}) = -m w A / N with w detached (a w that carries gradient adds "
                          f"-m w A logp / N)", inputs=cases.clean_inputs(x))


@visible
def test_padding_with_nan_inf_and_huge_values(sub, ctx):
    g = ctx.generator(21)
    fills = ((math.nan, math.nan), (math.inf, -math.inf), (-math.inf, math.inf),
             (1e30, -1e30), (-1e30, 1e30), (math.nan, 0.0), (0.0, math.inf))
    queued = []
    with batch(sub) as b:
        for dtype in DTYPES:
            base = cases.random_case(g, 3, 5, dtype, bool_mask=True, pad_fill=None, log_ratio_scale=0.15,
                                     p_valid=0.6)
            valid = base["mask"]
            for k, (fill_logp, fill_roll) in enumerate(fills):
                logp = torch.where(valid, base["logp"], _t(fill_logp, dtype))
                rollout = torch.where(valid, base["rollout_logp"], _t(fill_roll, dtype))
                mask = valid if (k + (dtype == torch.float64)) % 2 == 0 else valid.to(dtype)  # alternate kinds
                what = (f"{dtype}, {'bool' if mask.dtype == torch.bool else 'float'} mask, padding "
                        f"logp={fill_logp}, rollout_logp={fill_roll}")
                lp = leaf(logp)
                call = (b.masked_is_weights(logp, rollout, mask),
                        b.offpolicy_loss(lp, rollout, base["advantages"], mask))
                if k == 0:  # the same inputs with finite padding, once per dtype
                    call += (b.offpolicy_loss(base["logp"], base["rollout_logp"], base["advantages"], valid),)
                queued.append((valid, what, lp) + call)
    clean_loss = None
    for valid, what, lp, w, loss, *clean in queued:
        w = w.value
        _exactly_zero(w, ~valid, f"masked_is_weights ({what})")
        loss = loss.value
        if not bool(torch.isfinite(loss.detach())):
            raise Feedback(f"offpolicy_loss ({what}) returned {describe(loss)}: padding must be "
                           f"neutralised with torch.where before any arithmetic (NaN * 0 = NaN)")
        if clean:
            clean_loss = clean[0].value
        assert_close(loss, clean_loss.detach(), what=f"offpolicy_loss ({what}) versus the same inputs "
                                                     f"with finite padding: padding must not matter")
        loss.backward()
        if lp.grad is None:
            raise Feedback(f"offpolicy_loss ({what}): logp.grad is None after backward")
        _exactly_zero(lp.grad, ~valid, f"dL/dlogp ({what}) at padded positions")


# A window wide enough to keep log-ratios far beyond a +-20 (SkyRL, verl) or +-50 clamp:
# lower bound ~1e-12 (clip_low = 1 - 1e-12 is valid) and upper bound 1 + 1e30 (float32) / 1 + 1e300
# (float64). Inside it the weight is e^{log-ratio} itself, so a clamped log-ratio is visible.
WIDE = {torch.float32: (1.0 - 1e-12, 1e30), torch.float64: (1.0 - 1e-12, 1e300)}
# Kept log-ratios per dtype: +-21, +-25, -27 (e^-27 = 1.9e-12), and 60/68 (float32, e^68 = 3.4e29),
# 100/690 (float64, e^690 = 1.5e299): every one below the upper bound, above the lower one.
WIDE_LOG_RATIOS = {torch.float32: [[25.0, 60.0, -25.0, 0.0], [21.0, -21.0, 68.0, -27.0]],
                   torch.float64: [[25.0, 100.0, -25.0, 0.0], [21.0, -21.0, 690.0, -27.0]]}


@visible
def test_extreme_log_ratios(sub):
    # Valid log-ratios of +-1000 overflow exp to inf or underflow it to 0: weight 0, no NaN anywhere.
    # With a wide window (WIDE) log-ratios of 21 to 690 are kept with weight e^{log-ratio}: no clamp.
    queued = []
    wide = []
    with batch(sub) as b:
        for dtype in DTYPES:
            cl, ch = WIDE[dtype]
            lr = _t(WIDE_LOG_RATIOS[dtype], dtype)
            base = _t([[-1.0, -0.5, -2.0, -0.3], [-1.5, -0.25, -1.0, -0.75]], dtype)
            # both log-probabilities <= 0: the log-ratio is taken from logp's side when negative;
            # exact, every value being a small integer plus a short binary fraction
            logp = torch.where(lr < 0, base + lr, base)
            rollout = logp - lr
            mask = torch.ones(2, 4, dtype=torch.bool)
            adv = _t([1.5, -0.5], dtype)
            lp = leaf(logp)
            wide.append((dtype, cl, ch, logp, rollout, mask, adv, lp,
                         b.masked_is_weights(logp, rollout, mask, clip_low=cl, clip_high=ch),
                         b.offpolicy_loss(lp, rollout, adv, mask, clip_low=cl, clip_high=ch)))
            logp = _t([[-1.0, -1001.0, -0.5, -102.0], [-1.0, -101.0, -0.7, -0.3]], dtype)
            rollout = _t([[-1001.0, -1.0, -0.5, -2.0], [-1.0, -1.0, -0.6, -0.3]], dtype)
            # log-ratios [1000, -1000, 0, -100] and [0, -100, -0.1, 0]: exp(100) overflows float32 too
            mask = torch.ones(2, 4, dtype=torch.bool)
            adv = _t([1.5, -0.5], dtype)
            lp = leaf(logp)
            queued.append((dtype, logp, rollout, mask, adv, lp, b.masked_is_weights(logp, rollout, mask),
                           b.offpolicy_loss(lp, rollout, adv, mask)))
    for dtype, logp, rollout, mask, adv, lp, w, loss in queued:
        shown = {"logp": logp, "rollout_logp": rollout, "advantages": adv, "mask": mask}
        w = w.value
        check_tensor(w, what="masked_is_weights", shape=(2, 4), dtype=dtype)
        r = torch.exp((logp - rollout).to(torch.float64))
        keep = (r > 0.8) & (r < 1.2)
        expected = torch.where(keep, r, torch.zeros((), dtype=torch.float64))
        assert_close(w, expected, what=f"weights with log-ratios +-1000 and +-100 ({dtype}): an overflowing ratio "
                                       f"is outside the interval, weight 0", inputs=shown,
                     hint="select with torch.where (inf * 0 = NaN)", hint_when=nonfinite_where_finite)
        loss = loss.value
        exp_loss = -(expected * adv.to(torch.float64)[:, None] * logp.to(torch.float64)).sum() / 8
        assert_close(loss, exp_loss, what=f"offpolicy_loss with log-ratios +-1000 ({dtype})", inputs=shown)
        loss.backward()
        assert_close(lp.grad, -expected * adv.to(torch.float64)[:, None] / 8,
                     what=f"dL/dlogp with log-ratios +-1000 ({dtype}): 0 at the rejected tokens, no NaN",
                     inputs=shown)
    for dtype, cl, ch, logp, rollout, mask, adv, lp, w, loss in wide:
        shown = {"logp": logp, "rollout_logp": rollout, "advantages": adv, "mask": mask,
                 "clip_low": "1 - 1e-12", "clip_high": ch}  # a float would print as 1
        desc = (f"{dtype}, clip_low = 1 - 1e-12, clip_high = {ch:.0e}: log-ratios "
                f"{WIDE_LOG_RATIOS[dtype]} all lie inside the interval")
        expected = torch.exp((logp - rollout).to(torch.float64))
        w = check_tensor(w.value, what=f"masked_is_weights ({desc})", shape=(2, 4), dtype=dtype)
        assert_close(w, expected, what=f"masked_is_weights ({desc}): the weight is r = exp(log-ratio) itself",
                     inputs=shown, hint="do not clamp the log-ratio (e.g. to +-20, as SkyRL's safe_exp_delta "
                     "does) before exp: a valid width may keep e^25 or e^690",
                     hint_when=lambda got, exp: bool(((got - exp).abs() > 1e-3 * exp.abs()).any()))
        loss = check_tensor(loss.value, what=f"offpolicy_loss ({desc})", shape=(), dtype=dtype)
        exp_loss = -(expected * adv.to(torch.float64)[:, None] * logp.to(torch.float64)).sum() / 8
        assert_close(loss, exp_loss, what=f"offpolicy_loss ({desc})", inputs=shown)
        loss.backward()
        assert_close(lp.grad, -expected * adv.to(torch.float64)[:, None] / 8,
                     what=f"dL/dlogp ({desc}): -w A / N with w = r", inputs=shown)


def test_denominator_counts_rejected_tokens(sub):
    # Row 1: one retained token of four; row 2: three rejected tokens and one padded slot.
    queued = []
    with batch(sub) as b:
        for dtype in DTYPES:
            logp = _t([[-1.0, -1.0, -1.0, -1.0], [-2.0, -2.0, -2.0, -2.0]], dtype)
            log_ratio = _t([[0.0, 1.0, -1.0, 2.0], [1.0, -1.0, 3.0, 0.0]], dtype)
            rollout = logp - log_ratio
            mask = _t([[1, 1, 1, 1], [1, 1, 1, 0]], dtype)
            adv = _t([1.0, 3.0], dtype)
            lp = leaf(logp)
            queued.append((dtype, logp, rollout, mask, adv, lp, b.offpolicy_loss(lp, rollout, adv, mask)))
    for dtype, logp, rollout, mask, adv, lp, loss in queued:
        shown = {"logp": logp, "rollout_logp": rollout, "advantages": adv, "mask": mask}
        loss = loss.value
        assert_close(loss, torch.tensor(1.0 / 7, dtype=torch.float64),
                     what=f"offpolicy_loss ({dtype}) with 1 retained token among 7 valid ones: "
                          f"-(1 * 1 * -1) / 7; the denominator counts rejected tokens too (not 1)", inputs=shown)
        loss.backward()
        assert_close(lp.grad, _t([[-1 / 7, 0, 0, 0], [0, 0, 0, 0]], torch.float64),
                     what=f"dL/dlogp ({dtype}) with 1 retained token among 7 valid ones", inputs=shown)


def test_inputs_are_not_mutated(sub, ctx):
    g = ctx.generator(22)
    queued = []
    with batch(sub) as b:
        for dtype in DTYPES:
            for k, fill in enumerate(jc.PADS):  # every fill, and in the last case an all-empty mask
                bool_mask = k % 2 == (dtype == torch.float64)  # alternate mask kinds
                x = cases.random_case(g, 3, 4, dtype, bool_mask=bool_mask, pad_fill=fill, log_ratio_scale=0.5)
                if k == len(jc.PADS) - 1:
                    x["mask"] = torch.zeros_like(x["mask"])
                    x["logp"] = torch.full_like(x["logp"], fill)
                before = cases.clean_inputs(x)
                queued.append((dtype, fill, x, before, b.masked_is_weights(x["logp"], x["rollout_logp"], x["mask"]),
                               b.offpolicy_loss(x["logp"], x["rollout_logp"], x["advantages"], x["mask"])))
    # reading the results brings the calls' in-place changes back into x, as a direct call does
    for dtype, fill, x, before, w, loss in queued:
        w.value
        loss.value
        for name, t in x.items():
            b = before[name]
            same = torch.equal(torch.isnan(t), torch.isnan(b)) and torch.equal(
                torch.where(torch.isnan(b), torch.zeros_like(b), b),
                torch.where(torch.isnan(t), torch.zeros_like(t), t))
            if not same:
                raise Feedback(f"{name} was modified in place (padding filled with {fill}, {dtype}): "
                               f"before {describe(b)}, after {describe(t)}. Never write into the "
                               f"inputs; build new tensors with torch.where")
