"""T2: hand-checked values, the gradient next to PPO, bounds, extremes, padding, detachment.

Which test covers which class (more in test_t2_regimes.py):
- test_hand_checked_anchor_old / _rollout: the spec's numbers, both anchors, both dtypes.
- test_inside_band_gradient_equals_ppo_clip / test_clipped_tokens_keep_a_bounded_gradient /
  test_on_policy_is_reinforce: the gradient next to PPO (min-surrogate and zero-gradient mistakes).
- test_anchor_old_ignores_rollout_logp_without_tis / test_tis_weight_multiplies_token_loss: the
  TIS factor and its default (off); a TIS ratio 3e-6 below its cap 2 (an isclose() snap).
- test_bounds_and_endpoints: exact ties at both bounds (exp(+-log 2)), ratios 3e-6 inside both
  bounds (a torch.isclose() snap onto a bound), the default band [0, 5].
- test_extreme_log_ratios: +-1000 and e^-800 / e^-1800 log-probs (0/0 quotients), every
  configuration (+-25 ... +-700 per dtype, SkyRL's +-20 clamp: test_t2_regimes).
- test_padding_is_neutralised: NaN / +-inf / 1e30 padding (two fills a call, mixed across
  positions and inputs), bool and float masks, no mutation.
- test_frozen_inputs_get_no_gradient: stop-gradients, every configuration.
- test_token_mean_aggregation: token-mean, not seq-mean.
- test_default_band_caps_weights_at_5_in_both_functions: the defaults omitted in both functions.
"""

import math

import torch

from judge.testing import Feedback, assert_close, batch, describe, leaf, visible

F64 = torch.float64

# The hand-checked case (spec.md): eps 0.2 / 0.2, one token per response.
HAND_A = [1.0, -1.0, -4.0]
HAND_OLD = [[-1.0], [-1.0], [-3.0]]
HAND_LOGP = [[-1.69315], [-1.0], [-0.69741]]
HAND_ROLLOUT = [[-1.30685], [-1.5], [-1.0]]


def _hand(dtype):
    t = lambda v: torch.tensor(v, dtype=dtype)  # noqa: E731
    return t(HAND_LOGP), t(HAND_OLD), t(HAND_ROLLOUT), t(HAND_A), torch.ones(3, 1, dtype=torch.bool)


def _hand_check(sub, anchor, weights, loss_value, grad):
    with batch(sub) as b:
        calls = []
        for dtype in (F64, torch.float32):
            logp, old, rollout, adv, mask = _hand(dtype)
            anchor_logp = old if anchor == "old" else rollout
            inputs = {"logp": logp, f"{anchor}_logp": anchor_logp, "advantages": adv}
            w = b.cispo_weights(logp, anchor_logp, mask, eps_low=0.2, eps_high=0.2)
            x = leaf(logp)
            kw = dict(anchor="rollout", rollout_logp=rollout) if anchor == "rollout" else {}
            loss = b.cispo_loss(x, old, adv, mask, eps_low=0.2, eps_high=0.2, **kw)
            calls.append((dtype, inputs, w, x, loss))
    for dtype, inputs, w, x, loss in calls:
        assert_close(w.value, torch.tensor(weights, dtype=F64)[:, None], rtol=0, atol=1e-6, inputs=inputs,
                     what=f"cispo_weights, hand-checked case (anchor {anchor!r}, band [0.8, 1.2], {dtype})")
        loss = loss.value
        assert_close(loss, torch.tensor(loss_value, dtype=F64), rtol=0, atol=2e-6, inputs=inputs,
                     what=f"cispo_loss, hand-checked case (anchor {anchor!r}, token-mean over 3 tokens, {dtype})")
        loss.backward()
        assert_close(x.grad, torch.tensor(grad, dtype=F64)[:, None], rtol=0, atol=1e-5, inputs=inputs,
                     what=f"d loss / d logp, hand-checked case (anchor {anchor!r}; -r_hat * A / N, {dtype})")


@visible
def test_hand_checked_anchor_old(sub):
    _hand_check(sub, "old", [0.8, 1.0, 1.2], -0.997683, [-0.8 / 3, 1 / 3, 1.6])


@visible
def test_hand_checked_anchor_rollout(sub):
    _hand_check(sub, "rollout", [0.8, 1.2, 1.2], -1.064349, [-0.8 / 3, 0.4, 1.6])


def _ppo_clip_grad(logp, anchor_logp, adv, mask, eps_low, eps_high):
    """Gradient of the token-mean PPO-clip loss -min(r A, clip(r) A), by autograd (float64)."""
    x = leaf(logp.to(F64))
    r = torch.exp(x - anchor_logp.to(F64))
    a = adv.to(F64)[:, None]
    per_tok = -torch.minimum(r * a, r.clamp(1 - eps_low, 1 + eps_high) * a)
    (per_tok * mask).sum().div(mask.sum()).backward()
    return x.grad


@visible
def test_inside_band_gradient_equals_ppo_clip(sub, ctx):
    g = ctx.generator(201)
    B, L, eps_low, eps_high = 3, 4, 0.2, 0.28
    with batch(sub) as b:
        calls = []
        for dtype in (F64, torch.float32):
            old = (-2.5 * torch.rand(B, L, generator=g, dtype=F64) - 0.1)
            # log-ratios strictly inside (log 0.8, log 1.28), away from both bounds
            lr = torch.empty(B, L, dtype=F64).uniform_(-0.18, 0.2, generator=g)
            logp, old = (old + lr).to(dtype), old.to(dtype)
            adv = torch.randn(B, generator=g, dtype=F64).to(dtype)
            mask = torch.ones(B, L, dtype=torch.bool)
            x = leaf(logp)
            calls.append((dtype, logp, old, adv, mask, x,
                          b.cispo_loss(x, old, adv, mask, eps_low=eps_low, eps_high=eps_high)))
    for dtype, logp, old, adv, mask, x, loss in calls:
        expected = _ppo_clip_grad(logp, old, adv, mask, eps_low, eps_high)  # while the submission runs
        loss.value.backward()
        assert_close(x.grad, expected, inputs={"logp": logp, "old_logp": old, "advantages": adv},
                     what=f"inside the band the CISPO gradient must equal the PPO-clip gradient -r A / N ({dtype})")


@visible
def test_clipped_tokens_keep_a_bounded_gradient(sub):
    """A > 0 and r > 1 + eps_high: PPO's gradient is 0, CISPO's is -(1 + eps_high) A / N.
    A < 0 and r < 1 - eps_low: PPO's gradient is 0, CISPO's is -(1 - eps_low) A / N."""
    eps_low, eps_high = 0.2, 0.28
    with batch(sub) as b:
        calls = []
        for dtype in (F64, torch.float32):
            old = torch.tensor([[-2.0, -1.0], [-1.5, -0.5]], dtype=dtype)
            logp = old + torch.tensor([[math.log(3.0), math.log(1.6)], [math.log(0.25), math.log(0.5)]],
                                      dtype=dtype)
            adv = torch.tensor([2.0, -3.0], dtype=dtype)
            mask = torch.ones(2, 2, dtype=torch.bool)
            x = leaf(logp)
            calls.append((dtype, logp, old, adv, mask, x,
                          b.cispo_loss(x, old, adv, mask, eps_low=eps_low, eps_high=eps_high)))
    for dtype, logp, old, adv, mask, x, loss in calls:
        ppo = _ppo_clip_grad(logp, old, adv, mask, eps_low, eps_high)
        assert bool((ppo == 0).all()), "test construction: PPO must clip every token here"
        loss.value.backward()
        expected = torch.tensor([[-(1 + eps_high) * 2.0 / 4] * 2, [(1 - eps_low) * 3.0 / 4] * 2], dtype=F64)
        assert_close(x.grad, expected, inputs={"logp": logp, "old_logp": old, "advantages": adv},
                     what=f"d loss / d logp for tokens PPO clips out (ratios [[3, 1.6], [0.25, 0.5]], "
                          f"band [0.8, 1.28], {dtype}); PPO gives 0 here, CISPO keeps "
                          f"-clip(r) A / N: the clipped weight is a stop-gradient constant, not min()")


@visible
def test_on_policy_is_reinforce(sub, ctx):
    """Anchor "old" with logp == old_logp: r = 1, the loss is -sum A logp / N, the gradient -A / N."""
    g = ctx.generator(202)
    B, L = 3, 5
    with batch(sub) as b:
        calls = []
        for dtype in (F64, torch.float32):
            logp = (-3 * torch.rand(B, L, generator=g, dtype=F64) - 0.1).to(dtype)
            adv = torch.randn(B, generator=g, dtype=F64).to(dtype)
            mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
            losses = []
            for anchor, kw in (("old", {}), ("rollout", dict(rollout_logp=logp.clone()))):
                x = leaf(logp)
                losses.append((anchor, x, b.cispo_loss(x, logp.clone(), adv, mask, anchor=anchor,
                                                       eps_low=0.2, eps_high=0.2, **kw)))
            calls.append((dtype, logp, adv, mask, losses))
    for dtype, logp, adv, mask, losses in calls:
        n = int(mask.sum())
        exp_loss = -(adv.to(F64)[:, None] * logp.to(F64) * mask).sum() / n
        exp_grad = torch.where(mask, -adv.to(F64)[:, None] / n, torch.zeros((), dtype=F64)).expand(B, L)
        for anchor, x, loss in losses:
            loss = loss.value
            what = f"on-policy cispo_loss (anchor {anchor!r}, logp == {anchor}_logp, {dtype})"
            inputs = {"logp": logp, "advantages": adv, "mask": mask}
            assert_close(loss, exp_loss, what=f"{what}: expected the REINFORCE loss -sum A logp / N",
                         inputs=inputs)
            loss.backward()
            assert_close(x.grad, exp_grad, what=f"{what}: expected d loss / d logp = -A / N", inputs=inputs)


def test_anchor_old_ignores_rollout_logp_without_tis(sub, ctx):
    g = ctx.generator(203)
    logp = -2 * torch.rand(3, 4, generator=g, dtype=F64) - 0.1
    old = logp - 0.6 * torch.randn(3, 4, generator=g, dtype=F64)
    rollout = old - 0.6 * torch.randn(3, 4, generator=g, dtype=F64)
    adv = torch.randn(3, generator=g, dtype=F64)
    mask = torch.ones(3, 4, dtype=torch.bool)
    with batch(sub) as b:
        base = b.cispo_loss(logp, old, adv, mask, eps_low=0.2, eps_high=0.2)
        with_r = b.cispo_loss(logp, old, adv, mask, rollout_logp=rollout, anchor="old", eps_low=0.2,
                              eps_high=0.2)
    base = base.value
    assert_close(with_r.value, base, what='cispo_loss(anchor="old", rollout_logp=..., tis_enabled=False) must '
                                          'equal the loss without rollout_logp (the default anchor behaves '
                                          'exactly as before)',
                 inputs={"logp": logp, "old_logp": old, "rollout_logp": rollout, "advantages": adv})


def test_tis_weight_multiplies_token_loss(sub):
    """Anchor "old" + TIS: each token's gradient is scaled by clamp(exp(old - rollout), 0, 2)."""
    with batch(sub) as b:
        calls = []
        for dtype in (F64, torch.float32):
            logp = torch.tensor([[-1.0, -0.5, -2.0, -0.3, -0.8]], dtype=dtype)
            old = logp.clone()  # r = 1: only the TIS factor acts
            # the last TIS ratio is 3e-6 (relative) below its cap 2: kept as is, where a
            # torch.isclose() snap onto the bound (rtol 1e-5) gives 2
            rollout = old - torch.tensor([[math.log(0.5), math.log(1.5), math.log(3.0), -1000.0,
                                           math.log(2.0) + math.log1p(-3e-6)]], dtype=dtype)
            adv = torch.tensor([2.0], dtype=dtype)
            mask = torch.ones(1, 5, dtype=torch.bool)
            x = leaf(logp)
            calls.append((dtype, logp, old, rollout, adv, x,
                          b.cispo_loss(x, old, adv, mask, rollout_logp=rollout, tis_enabled=True,
                                       eps_low=0.2, eps_high=0.2)))
    for dtype, logp, old, rollout, adv, x, loss in calls:
        loss = loss.value
        tis = torch.tensor([0.5, 1.5, 2.0, 0.0, 2.0 * (1 - 3e-6)], dtype=F64)
        inputs = {"logp": logp, "old_logp": old, "rollout_logp": rollout, "advantages": adv}
        assert_close(loss, -(tis * 2.0 * logp.to(F64)[0]).sum() / 5, inputs=inputs,
                     what=f"cispo_loss with tis_enabled (TIS ratios [0.5, 1.5, 3, e^-1000, 2(1 - 3e-6)] "
                          f"-> weights [0.5, 1.5, 2, 0, 2(1 - 3e-6)], {dtype})")
        loss.backward()
        assert_close(x.grad, (-tis * 2.0 / 5)[None], inputs=inputs,
                     what=f"d loss / d logp with tis_enabled (-tis * r_hat * A / N, {dtype})")


def test_bounds_and_endpoints(sub):
    """Ratios exactly on a bound give the bound; outside give the bound; inside pass through."""
    # log-ratios exactly +-log 2 make exp() give exactly 2.0 and 0.5 in both dtypes; the last two
    # ratios sit 3e-6 (relative) inside the band [0.5, 2]: passed through, where a torch.isclose()
    # snap onto a bound (rtol 1e-5) returns the bound
    with batch(sub) as b:
        calls = []
        for dtype in (F64, torch.float32):
            lr = torch.tensor([[math.log(2.0), -math.log(2.0), math.log(3.0), math.log(0.25), math.log(1.5), 0.0,
                                math.log(2.0) + math.log1p(-3e-6), -math.log(2.0) + math.log1p(3e-6)]],
                              dtype=dtype)
            assert float(torch.exp(lr[0, 0])) == 2.0 and float(torch.exp(lr[0, 1])) == 0.5
            anchor = torch.zeros_like(lr)
            mask = torch.ones_like(lr, dtype=torch.bool)
            calls.append((dtype, lr, anchor, b.cispo_weights(lr, anchor, mask, eps_low=0.5, eps_high=1.0),
                          b.cispo_weights(lr, anchor, mask)))
    for dtype, lr, anchor, w_band, w_default in calls:
        expected = torch.tensor([[2.0, 0.5, 2.0, 0.5, float(torch.exp(lr[0, 4])), 1.0,
                                  float(torch.exp(lr[0, 6])), float(torch.exp(lr[0, 7]))]], dtype=F64)
        assert_close(w_band.value, expected, inputs={"logp": lr, "anchor_logp": anchor},
                     what=f"cispo_weights with band [0.5, 2] (eps_low=0.5, eps_high=1.0), ratios "
                          f"[2, 0.5, 3, 0.25, 1.5, 1, 2(1 - 3e-6), 0.5(1 + 3e-6)] ({dtype})")
        expected = torch.exp(lr.to(F64)).clamp(0.0, 5.0)
        assert_close(w_default.value, expected, inputs={"logp": lr, "anchor_logp": anchor},
                     what=f"cispo_weights with the defaults eps_low=1, eps_high=4 (band [0, 5]) ({dtype})")


def test_extreme_log_ratios(sub):
    """+-1000 log-ratios give the bounds, never NaN; also when both log-probs underflow exp()."""
    with batch(sub) as b:
        calls = []
        for dtype in (F64, torch.float32):
            logp = torch.tensor([[-1.0, -1001.0, -800.0, -1800.0]], dtype=dtype)
            anchor = torch.tensor([[-1001.0, -1.0, -1800.0, -800.0]], dtype=dtype)
            mask = torch.ones(1, 4, dtype=torch.bool)
            weights = [(eps_low, eps_high, b.cispo_weights(logp, anchor, mask, eps_low=eps_low,
                                                           eps_high=eps_high))
                       for eps_low, eps_high in ((0.2, 0.28), (1.0, 4.0))]
            adv = torch.tensor([1.5], dtype=dtype)
            losses = []
            for kw in (dict(anchor="old"), dict(anchor="rollout", rollout_logp=anchor),
                       dict(anchor="old", rollout_logp=logp.flip(1), tis_enabled=True)):
                x = leaf(logp)
                losses.append((kw, x, b.cispo_loss(x, anchor, adv, mask, eps_low=0.2, eps_high=0.28, **kw)))
            calls.append((dtype, logp, anchor, weights, losses))
    for dtype, logp, anchor, weights, losses in calls:
        inputs = {"logp": logp, "anchor_logp": anchor}
        for eps_low, eps_high, w in weights:
            lo, hi = 1 - eps_low, 1 + eps_high
            assert_close(w.value, torch.tensor([[hi, lo, hi, lo]], dtype=F64), inputs=inputs,
                         what=f"cispo_weights for log-ratios [+1000, -1000, +1000, -1000] (eps_low={eps_low}, "
                              f"eps_high={eps_high}); exp(logp) / exp(anchor_logp) is 0/0 = NaN for the last "
                              f"two: exponentiate the difference ({dtype})")
        for kw, x, loss in losses:
            loss = loss.value
            what = f"cispo_loss with log-ratios of +-1000 (anchor {kw['anchor']!r}{', tis' if kw.get('tis_enabled') else ''}, {dtype})"
            if not bool(torch.isfinite(loss.detach())):
                raise Feedback(f"{what} must be finite, got {describe(loss)}")
            loss.backward()
            if x.grad is None or not bool(torch.isfinite(x.grad).all()):
                raise Feedback(f"{what}: the gradient must be finite, got {describe(x.grad)}")
            w = torch.tensor([1.28, 0.8, 1.28, 0.8], dtype=F64)
            if kw.get("tis_enabled"):  # TIS ratio exp(old - rollout) = e^[799, 799, -799, -799] -> [2, 2, 0, 0]
                w = w * torch.exp(anchor.to(F64) - logp.flip(1).to(F64))[0].clamp(0, 2)
            assert_close(x.grad, (-w * 1.5 / 4)[None], inputs=inputs, what=f"d loss / d logp, {what}")


def _two_fills(t, mask, fills, flip):
    """``t`` with its padded positions holding ``fills[0]`` and ``fills[1]`` in turn (swapped
    when ``flip``), in ``t``'s dtype."""
    first = (torch.arange(t.numel()).reshape(t.shape) % 2 == 0) ^ flip
    a, b = (torch.tensor(f, dtype=t.dtype) for f in fills)
    return torch.where(mask, t, torch.where(first, a, b))


@visible
def test_padding_is_neutralised(sub, ctx):
    g = ctx.generator(204)
    B, L = 3, 5
    mask = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)
    configs = (dict(anchor="old"), dict(anchor="rollout"), dict(anchor="old", tis_enabled=True))
    with batch(sub) as b:
        calls = []
        for dtype in (F64, torch.float32):
            logp0 = (-2 * torch.rand(B, L, generator=g, dtype=F64) - 0.1).to(dtype)
            old0 = (logp0.to(F64) - 0.8 * torch.randn(B, L, generator=g, dtype=F64)).to(dtype)
            roll0 = (old0.to(F64) - 0.8 * torch.randn(B, L, generator=g, dtype=F64)).to(dtype)
            adv = torch.tensor([1.0, -2.0, 5.0], dtype=dtype)
            zero = torch.zeros((), dtype=dtype)
            clean = [torch.where(mask, t, zero) for t in (logp0, old0, roll0)]
            # the same inputs with padding 0 give the values padding must not change
            w_clean = b.cispo_weights(clean[0], clean[1], mask, eps_low=0.2, eps_high=0.2)
            loss_clean = [b.cispo_loss(clean[0], clean[1], adv, mask, rollout_logp=clean[2], eps_low=0.2,
                                       eps_high=0.2, **kw) for kw in configs]
            fills = []
            # two calls, each with two fills alternating over the padded positions (shifted per
            # input, so a position may hold NaN in logp and -inf in old_logp): NaN and -inf with a
            # bool mask, inf and 1e30 with a 0/1 float mask
            for i, fill in enumerate(((math.nan, -math.inf), (math.inf, 1e30))):
                mk = mask if i == 0 else mask.to(dtype)
                dirty = [_two_fills(t, mask, fill, flip=(k == 1)) for k, t in enumerate((logp0, old0, roll0))]
                keep = [t.clone() for t in dirty]
                w = b.cispo_weights(dirty[0], dirty[1], mk, eps_low=0.2, eps_high=0.2)
                losses = []
                for kw in configs:
                    x = leaf(dirty[0])
                    losses.append((kw, x, b.cispo_loss(x, dirty[1], adv, mk, rollout_logp=dirty[2],
                                                       eps_low=0.2, eps_high=0.2, **kw)))
                fills.append((fill, mk, dirty, keep, w, losses))
            calls.append((dtype, w_clean, loss_clean, fills))
    for dtype, w_clean, loss_clean, fills in calls:
        w_clean = torch.where(mask, w_clean.value.to(F64), torch.zeros((), dtype=F64))
        loss_clean = [p.value for p in loss_clean]
        for fill, mk, dirty, keep, w, losses in fills:
            inputs = {"logp": dirty[0], "old_logp": dirty[1], "rollout_logp": dirty[2], "mask": mk}
            fill = " and ".join(map(str, fill))
            assert_close(w.value, w_clean, inputs=inputs,
                         what=f"cispo_weights with padding filled with {fill} ({dtype}): 0 at padding, "
                              f"unchanged elsewhere")
            for (kw, x, loss), ref_loss in zip(losses, loss_clean):
                loss = loss.value
                what = (f"cispo_loss (anchor {kw['anchor']!r}{', tis' if kw.get('tis_enabled') else ''}) "
                        f"with padding filled with {fill} ({dtype})")
                assert_close(loss, ref_loss.detach(), inputs=inputs,
                             what=f"{what}: must equal the loss with padding 0 (use torch.where, not x * mask)")
                loss.backward()
                pad_grad = x.grad[~mask] if x.grad is not None else None
                if pad_grad is None or not bool((pad_grad == 0).all()):
                    leak = x.grad is not None and bool(torch.isnan(x.grad).any())
                    raise Feedback(f"{what}: the gradient at padded positions must be exactly 0, got "
                                   f"{describe(x.grad)}{' (NaN: padding leaked through x * mask)' if leak else ''}")
            for name, before, after in zip(("logp", "old_logp", "rollout_logp"), keep, dirty):
                if not torch.equal(before.isnan(), after.isnan()) or not torch.equal(
                        torch.nan_to_num(before), torch.nan_to_num(after)):
                    raise Feedback(f"the submission modified its input {name} in place: before "
                                   f"{describe(before)}, after {describe(after)}")


def test_frozen_inputs_get_no_gradient(sub, ctx):
    g = ctx.generator(205)
    B, L = 2, 4
    logp = -2 * torch.rand(B, L, generator=g, dtype=F64) - 0.1
    old = logp - 0.5 * torch.randn(B, L, generator=g, dtype=F64)
    rollout = old - 0.5 * torch.randn(B, L, generator=g, dtype=F64)
    adv = torch.randn(B, generator=g, dtype=F64)
    mask = torch.ones(B, L, dtype=torch.bool)
    with batch(sub) as b:
        x = leaf(logp)
        pw = b.cispo_weights(x, leaf(old), mask, eps_low=0.2, eps_high=0.2)
        losses = []
        for kw in (dict(anchor="old"), dict(anchor="rollout"), dict(anchor="old", tis_enabled=True)):
            xs = {"logp": leaf(logp), "old_logp": leaf(old), "rollout_logp": leaf(rollout), "advantages": leaf(adv)}
            losses.append((kw, xs, b.cispo_loss(xs["logp"], xs["old_logp"], xs["advantages"], mask,
                                                rollout_logp=xs["rollout_logp"], eps_low=0.2, eps_high=0.2,
                                                **kw)))
    if pw.value.requires_grad:
        raise Feedback("cispo_weights must return detached weights (sg(clip(r))), but its output has "
                       "requires_grad=True when logp requires grad")
    for kw, xs, loss in losses:
        loss.value.backward()
        for name in ("old_logp", "rollout_logp", "advantages"):
            gr = xs[name].grad
            if gr is not None and bool((gr != 0).any()):
                raise Feedback(f"cispo_loss (anchor {kw['anchor']!r}{', tis' if kw.get('tis_enabled') else ''}): "
                               f"{name} must be a stop-gradient constant, but it received gradient {describe(gr)}")


def test_token_mean_aggregation(sub):
    """Lengths 2 and 8, A = +1 / -1, r = 1: every valid token gets -A / 10 (mass 0.2 / 0.8)."""
    with batch(sub) as b:
        calls = []
        for dtype in (F64, torch.float32):
            logp = torch.full((2, 8), -1.0, dtype=dtype)
            logp[0, 2:] = float("nan")
            mask = torch.zeros(2, 8, dtype=torch.bool)
            mask[0, :2] = True
            mask[1, :] = True
            adv = torch.tensor([1.0, -1.0], dtype=dtype)
            x = leaf(logp)
            calls.append((dtype, adv, x, b.cispo_loss(x, logp.clone(), adv, mask)))
    for dtype, adv, x, loss in calls:
        loss = loss.value
        inputs = {"lengths": [2, 8], "advantages": adv, "logp": "-1 on valid tokens"}
        assert_close(loss, torch.tensor(-(2 * -1.0 - 8 * -1.0) / 10, dtype=F64), inputs=inputs,
                     what=f"token-mean cispo_loss ({dtype}): -sum A logp / N with N = 10 valid tokens "
                          f"(a mean per response, then over responses, gives 0 here)")
        loss.backward()
        expected = torch.zeros(2, 8, dtype=F64)
        expected[0, :2] = -0.1
        expected[1, :] = 0.1
        assert_close(x.grad, expected, inputs=inputs,
                     what=f"d loss / d logp with lengths 2 and 8 ({dtype}): token-mean gives every token "
                          f"-A / 10")


def test_default_band_caps_weights_at_5_in_both_functions(sub):
    """The defaults eps_low=1, eps_high=4 give the band [0, 5]: a ratio of 8 is capped at 5, in
    cispo_weights and in cispo_loss called without eps arguments."""
    with batch(sub) as b:
        calls = []
        for dtype in (F64, torch.float32):
            anchor = torch.full((1, 4), -3.0, dtype=dtype)
            logp = anchor + torch.tensor([[math.log(8.0), math.log(4.5), math.log(0.125), -30.0]], dtype=dtype)
            mask = torch.ones(1, 4, dtype=torch.bool)
            adv = torch.tensor([1.5], dtype=dtype)
            x = leaf(logp)
            calls.append((dtype, logp, anchor, adv, b.cispo_weights(logp, anchor, mask), x,
                          b.cispo_loss(x, anchor, adv, mask)))
    for dtype, logp, anchor, adv, w, x, loss in calls:
        inputs = {"logp": logp, "old_logp": anchor, "advantages": adv}
        expected_w = torch.exp(logp.to(F64) - anchor.to(F64)).clamp(0.0, 5.0)  # [5, 4.5, 0.125, e^-30]
        assert_close(w.value, expected_w, inputs=inputs,
                     what=f"cispo_weights with the default eps (band [0, 5]: ratio 8 is capped at 5) ({dtype})")
        loss = loss.value
        assert_close(loss, -(expected_w * 1.5 * logp.to(F64)).sum() / 4, inputs=inputs,
                     what=f"cispo_loss with the default eps (band [0, 5]; -sum r_hat A logp / N) ({dtype})")
        loss.backward()
        assert_close(x.grad, -expected_w * 1.5 / 4, inputs=inputs,
                     what=f"d cispo_loss / d logp with the default eps (-r_hat A / N, r_hat capped at 5) ({dtype})")
