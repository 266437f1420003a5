"""T2: hand-checked values, conventions, detachment, padding and aggregation.

Which test covers which class (issue 17): conventions (population std, eps outside the sqrt,
contiguous groups, normalize_std, both aggregations, empty rows in B), the defaults
(test_default_clip_widths), detachment, padding and mutation. Overflow regimes, library
conventions, widths used as given and float32 rewards 3000 +- 1 are in test_t2_extremes.py.
"""

from __future__ import annotations

import math

import torch

from judge.testing import (Feedback, assert_close, assert_no_grad, batch, check_tensor, describe, leaf,
                           sibling, visible)

backward_all = sibling(__file__, "_cases").backward_all   # one backward for many losses

F32, F64 = torch.float32, torch.float64


def _close(out, expected, *, what, inputs, atol=1e-6, hints=()):
    """assert_close with an absolute tolerance for 6-digit hand values, plus diagnostic hints.

    ``hints`` is a list of (values, message): when the output matches ``values`` instead, the
    message says which convention the submission followed.
    """
    exp = torch.as_tensor(expected, dtype=F64)
    try:
        assert_close(out, exp, what=what, rtol=0.0, atol=atol, inputs=inputs)
    except Feedback as e:
        for alt, msg in hints:
            if (isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(exp.shape)
                    and torch.allclose(out.detach().to(F64), torch.as_tensor(alt, dtype=F64),
                                       rtol=0.0, atol=atol)):
                raise Feedback(f"{e}\n  hint: {msg}") from None
        raise


def _adv(b, rewards, G, dtype=F64, *, positional=(), **kwargs):
    """Queue group_advantages(rewards, G, *positional, **kwargs) in the batch ``b``; ``_adv_result``
    reads it. ``positional``: (eps, normalize_std) passed by position, as the signature orders them."""
    r = torch.tensor(rewards, dtype=dtype)
    inputs = {"rewards": r, "group_size": G, **dict(zip(("eps", "normalize_std"), positional)), **kwargs}
    return b.group_advantages(r, G, *positional, **kwargs), len(rewards), dtype, inputs


def _adv_result(queued):
    pending, n, dtype, inputs = queued
    out = pending.value
    check_tensor(out, what="group_advantages", shape=(n,), dtype=dtype)
    return out, inputs


# ---------------------------------------------------------------------------------------------
# group advantages


@visible
def test_reference_advantages_population_std(sub):
    unbiased = "these are the values of the UNBIASED std (divide by G-1, torch.std's default, as " \
               "slime/verl/SkyRL do); this exercise uses the population std (divide by G)"
    with batch(sub) as b:
        queued = [(_adv(b, [0.0, 1.0], 2, dtype), _adv(b, [1.0, 0.0, 0.0, 0.0], 4, dtype))
                  for dtype in (F64, F32)]
    for q2, q4 in queued:
        out, inp = _adv_result(q2)
        _close(out, [-0.999998, 0.999998], what="group_advantages([0, 1], 2)", inputs=inp,
               hints=[([-0.707106, 0.707106], unbiased),
                      ([-0.5, 0.5], "these are R - mean: the std division is missing")])
        out, inp = _adv_result(q4)
        _close(out, [1.732047, -0.577349, -0.577349, -0.577349],
               what="group_advantages([1, 0, 0, 0], 4)", inputs=inp,
               hints=[([1.499997, -0.499999, -0.499999, -0.499999], unbiased)])


@visible
def test_no_std_option(sub):
    with batch(sub) as b:
        q1 = _adv(b, [0.0, 1.0], 2, normalize_std=False)
        # by position, in the spec's order (rewards, group_size, eps, normalize_std): a signature
        # with the two swapped would read normalize_std=0.1 (truthy) and eps=False
        q2 = _adv(b, [1.0, 0.0, 0.0, 0.0, 3.0, 1.0, 2.0, 2.0], 4, positional=(0.1, False))
    out, inp = _adv_result(q1)
    _close(out, [-0.5, 0.5], what="group_advantages([0, 1], 2, normalize_std=False)", inputs=inp,
           atol=1e-12, hints=[([-0.999998, 0.999998], "normalize_std=False was ignored")])
    out, inp = _adv_result(q2)
    _close(out, [0.75, -0.25, -0.25, -0.25, 1.0, -1.0, 0.0, 0.0],
           what="group_advantages(rewards, 4, 0.1, False) (eps and normalize_std by position)",
           inputs=inp, atol=1e-12)


@visible
def test_eps_is_added_outside_the_sqrt(sub):
    with batch(sub) as b:
        q1 = _adv(b, [0.0, 1.0], 2, eps=0.1)
        # second group: a spread of 1e-9 (sigma = 5e-10 > 0): A = +-5e-10 / (5e-10 + 1e-6), not 0
        # (a guard that zeroes "constant" groups by sigma < 1e-8, not sigma == 0, gives 0 here)
        q2 = _adv(b, [0.0, 1e-6, 0.0, 1e-9], 2)
    out, inp = _adv_result(q1)
    _close(out, [-0.5 / 0.6, 0.5 / 0.6], what="group_advantages([0, 1], 2, eps=0.1)", inputs=inp,
           hints=[([-0.5 / math.sqrt(0.35), 0.5 / math.sqrt(0.35)],
                   "eps was added inside the square root (sqrt(var + eps)); use sigma + eps"),
                  ([-0.5 / math.sqrt(0.26), 0.5 / math.sqrt(0.26)],
                   "eps**2 was added to the variance; use sigma + eps")])
    # a tiny spread: sigma = 5e-7 is comparable with eps = 1e-6
    out, inp = _adv_result(q2)
    a9 = 5e-10 / (5e-10 + 1e-6)
    inside = [-5e-7 / math.sqrt(2.5e-13 + 1e-6), 5e-7 / math.sqrt(2.5e-13 + 1e-6),
              -5e-10 / math.sqrt(2.5e-19 + 1e-6), 5e-10 / math.sqrt(2.5e-19 + 1e-6)]
    _close(out, [-1.0 / 3.0, 1.0 / 3.0, -a9, a9], what="group_advantages([0, 1e-6, 0, 1e-9], 2)",
           inputs=inp,
           hints=[(inside, "eps was added inside the square root (sqrt(var + eps)); use sigma + eps"),
                  ([-1.0 / 3.0, 1.0 / 3.0, 0.0, 0.0],
                   "the group [0, 1e-9] was treated as constant: its sigma is 5e-10, not 0, so "
                   "A = +-5e-10 / (5e-10 + eps); only equal rewards give A = 0")])


@visible
def test_equal_rewards_give_zero(sub):
    # Means that are exact in float32 and float64: the centred rewards are exactly 0.
    exact = [([1.0, 1.0, 1.0, 1.0], 4, F32), ([0.0, 0.0], 2, F32), ([0.5] * 8, 8, F32),
             ([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0], 4, F32), ([1.0] * 6, 3, F64),
             ([0.3, -1.7, 2.2], 1, F32), ([0.3, -1.7, 2.2], 1, F64)]
    with batch(sub) as b:
        queued = [_adv(b, rewards, G, dtype) for rewards, G, dtype in exact]
        q27 = _adv(b, [2.7] * 7, 7)
    for (rewards, G, dtype), q in zip(exact, queued):
        out, inp = _adv_result(q)
        n_const = len(rewards) if G == 1 else G
        head = out[:n_const]
        if not bool(torch.isfinite(out).all()) or bool((head != 0).any()):
            raise Feedback(f"group_advantages({rewards}, {G}) in {str(dtype).replace('torch.', '')}: "
                           f"a group of equal rewards (or of size 1) must give exactly 0, "
                           f"got {describe(out)} (divide by sigma + eps, so 0 / eps = 0)")
    # float64 2.7s: the mean is off by one ulp, which the natural formula turns into |A| ~ 4e-10.
    out, inp = _adv_result(q27)
    _close(out, [0.0] * 7, what="group_advantages([2.7] * 7, 7) in float64", inputs=inp)


@visible
def test_groups_are_contiguous_slices(sub):
    rewards = [0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 3.0]
    with batch(sub) as b:
        q = _adv(b, rewards, 4, normalize_std=False)
    out, inp = _adv_result(q)
    _close(out, [-0.5, 0.5, -0.5, 0.5, -0.5, -0.5, -0.5, 1.5],
           what="group_advantages([0, 1, 0, 1, 1, 1, 1, 3], 4, normalize_std=False)", inputs=inp,
           atol=1e-12,
           hints=[([-1.0, -0.5, -1.0, -0.5, 0.0, 0.5, 0.0, 1.5],
                   "groups were taken as interleaved columns (view(G, -1)); group g is "
                   "rewards[g*G:(g+1)*G]"),
                  ([-0.875, 0.125, -0.875, 0.125, 0.125, 0.125, 0.125, 2.125],
                   "the mean was taken over the whole batch, not per group")])


def test_group_advantages_does_not_mutate_rewards(sub):
    r = torch.tensor([0.0, 1.0, 3.0, 2.0, 2.0, 5.0], dtype=F64)
    before = r.clone()
    with batch(sub) as b:
        outs = [b.group_advantages(r, 3), b.group_advantages(r, 2, normalize_std=False)]
    for out in outs:
        out.get()   # raises what the call raised; r holds the calls' in-place changes
    if not torch.equal(r, before):
        raise Feedback(f"group_advantages modified its input in place: rewards {describe(before)} "
                       f"became {describe(r)}")


# ---------------------------------------------------------------------------------------------
# the clipped surrogate


def _single_token(b, ratio, A, dtype=F64, **kwargs):
    """Queue, in the batch ``b``, the loss of one valid token with ratio r (logp = log r,
    old_logp = 0); ``_single_token_result`` reads the loss and d loss / d logp."""
    logp = torch.tensor([[math.log(ratio)]], dtype=dtype)
    lp = leaf(logp)
    old = torch.zeros(1, 1, dtype=dtype)
    adv = torch.tensor([A], dtype=dtype)
    mask = torch.ones(1, 1, dtype=torch.bool)
    return b.grpo_loss(lp, old, adv, mask, **kwargs), lp, dtype, (logp, old, adv, kwargs)


def _single_token_result(queued):
    pending, lp, dtype, (logp, old, adv, kwargs) = queued
    loss = pending.value
    check_tensor(loss, what="grpo_loss", shape=(), dtype=dtype)
    loss.backward()
    grad = lp.grad if lp.grad is not None else torch.zeros_like(lp)
    return loss, grad.reshape(()), {"logp": logp, "old_logp": old, "advantages": adv, **kwargs}


@visible
def test_hand_checked_tokens(sub):
    clips = {"clip_low": 0.2, "clip_high": 0.28}
    table = {+1.0: ([-1.28, -0.5, -1.1], [0.0, -0.5, -1.1]),
             -1.0: ([1.5, 0.8, 1.1], [1.5, 0.0, 1.1])}
    cases = [(A, ratio, exp_loss, exp_grad, per_token)
             for A, (losses, grads) in table.items()
             for ratio, exp_loss, exp_grad in zip([1.5, 0.5, 1.1], losses, grads)
             for per_token in (False, True)]
    with batch(sub) as b:
        queued = [_single_token(b, ratio, A, per_token_loss=per_token, **clips)
                  for A, ratio, _, _, per_token in cases]
    for (A, ratio, exp_loss, exp_grad, per_token), q in zip(cases, queued):
        loss, grad, inp = _single_token_result(q)
        what = f"one token, ratio {ratio}, A = {A:+g}, clip 0.2/0.28"
        _close(loss, exp_loss, what=f"loss of {what}", inputs=inp, atol=1e-9,
               hints=[(-max(ratio * A, min(max(ratio, 0.8), 1.28) * A),
                       "min and max are swapped: the loss is -min(rA, clip(r)A)")])
        _close(grad, exp_grad, what=f"d loss / d logp of {what}", inputs=inp, atol=1e-9)


def test_default_clip_widths(sub):
    # defaults clip_low = clip_high = 0.2: range [0.8, 1.2]
    cases = ((1.3, 1.0, -1.2, 0.0), (1.1, 1.0, -1.1, -1.1),
             (0.7, -1.0, 0.8, 0.0), (0.9, -1.0, 0.9, 0.9))
    with batch(sub) as b:
        queued = [_single_token(b, ratio, A) for ratio, A, _, _ in cases]
    for (ratio, A, exp_loss, exp_grad), q in zip(cases, queued):
        loss, grad, inp = _single_token_result(q)
        what = f"one token, ratio {ratio}, A = {A:+g}, default clip_low and clip_high (0.2)"
        _close(loss, exp_loss, what=f"loss of {what}", inputs=inp, atol=1e-9)
        _close(grad, exp_grad, what=f"d loss / d logp of {what}", inputs=inp, atol=1e-9)


@visible
def test_asymmetric_clip(sub):
    # clip_low=0.1, clip_high=0.5 -> range [0.9, 1.5]; one token per response, token-mean
    ratios = [1.4, 0.85, 0.6, 1.6, 1.4, 0.7]
    advs = [1.0, -1.0, 1.0, 1.0, -1.0, -1.0]
    exp_tok = [-1.4, 0.9, -0.6, -1.5, 1.4, 0.9]
    exp_grad = [-1.4, 0.0, -0.6, 0.0, 1.4, 0.0]
    B = len(ratios)
    logp = torch.tensor([[math.log(r)] for r in ratios], dtype=F64)
    old = torch.zeros(B, 1, dtype=F64)
    adv = torch.tensor(advs, dtype=F64)
    mask = torch.ones(B, 1, dtype=torch.bool)
    inp = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask,
           "clip_low": 0.1, "clip_high": 0.5}
    with batch(sub) as b:
        queued = []
        for per_token in (True, False):
            lp = leaf(logp)
            # per_token_loss=True by position, in the spec's order (..., mask, clip_low, clip_high,
            # per_token_loss): a signature with the widths swapped reads clip_low=0.5, clip_high=0.1
            queued.append((per_token, lp, b.grpo_loss(lp, old, adv, mask, 0.1, 0.5, True) if per_token else
                           b.grpo_loss(lp, old, adv, mask, clip_low=0.1, clip_high=0.5, per_token_loss=False)))
    for per_token, lp, pending in queued:
        loss = pending.value
        what = (f"grpo_loss with ratios {ratios}, A {advs}, "
                + ("0.1, 0.5, True by position (clip_low, clip_high, per_token_loss)" if per_token
                   else "clip_low=0.1, clip_high=0.5"))
        _close(loss, sum(exp_tok) / B, what=what, inputs=inp, atol=1e-9)
        loss.backward()
        _close(lp.grad, [[g / B] for g in exp_grad], what=f"d {what} / d logp", inputs=inp, atol=1e-9,
               hints=[([[-1.4 / B], [0.0], [-0.6 / B], [0.0], [0.0], [0.0]],
                       "clip_low was used for both bounds (clip_high ignored)"),
                      ([[0.0], [0.0], [-0.6 / B], [0.0], [1.4 / B], [0.7 / B]],
                       "clip_low and clip_high are swapped")])


def _two_responses(n1=2, n2=8, A=(1.0, -1.0), pad=0.0, dtype=F64, extra_empty=False):
    L = max(n1, n2)
    logp = torch.full((2, L), -1.0, dtype=dtype)
    mask = torch.zeros(2, L, dtype=torch.bool)
    mask[0, :n1] = True
    mask[1, :n2] = True
    adv = torch.tensor(A, dtype=dtype)
    if extra_empty:
        logp = torch.cat([logp, torch.full((1, L), -1.0, dtype=dtype)])
        mask = torch.cat([mask, torch.zeros(1, L, dtype=torch.bool)])
        adv = torch.cat([adv, torch.tensor([5.0], dtype=dtype)])
    old = logp.clone()                                       # r = 1 on valid tokens
    logp = torch.where(mask, logp, torch.full_like(logp, pad))
    old = torch.where(mask, old, torch.full_like(old, pad))
    return logp, old, adv, mask


@visible
def test_aggregation_check(sub):
    """Lengths 2 and 8, A = +1 / -1, r = 1: gradient mass 0.2 / 0.8 vs 0.5 / 0.5."""
    logp, old, adv, mask = _two_responses()
    inp = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask}
    expect = {
        True: (0.6, -0.1, 0.1, "token-mean (per_token_loss=True)"),
        False: (0.0, -0.25, 1.0 / 16.0, "seq-mean-token-mean (per_token_loss=False)"),
    }
    with batch(sub) as b:
        queued = []
        for per_token in expect:
            lp = leaf(logp)
            queued.append((per_token, lp, b.grpo_loss(lp, old, adv, mask, per_token_loss=per_token)))
    for per_token, lp, pending in queued:
        exp_loss, g1, g2, name = expect[per_token]
        loss = pending.value
        what = f"{name}, lengths 2 and 8, A = +1/-1, r = 1"
        other = expect[not per_token]
        _close(loss, exp_loss, what=f"loss of {what}", inputs=inp, atol=1e-9,
               hints=[(other[0], "the two aggregations are swapped"),
                      (-(2 * 1.0 - 8 * 1.0) / 16 if per_token else -(2 / 8 - 1) / 2,
                       "divided by the padded length L instead of the number of valid tokens")])
        loss.backward()
        exp_grad = torch.zeros_like(logp)
        exp_grad[0, :2] = g1
        exp_grad[1, :8] = g2
        _close(lp.grad, exp_grad, what=f"d loss / d logp of {what}", inputs=inp, atol=1e-9)
        mass = lp.grad.detach().abs().sum(dim=-1)
        mass = mass / mass.sum()
        want = [0.2, 0.8] if per_token else [0.5, 0.5]
        _close(mass, want, what=f"share of the gradient mass per response, {what}", inputs=inp)


@visible
def test_empty_responses_count_in_B(sub):
    # lengths 2, 8 and an empty third response with A = 5: seq-mean divides by B = 3
    logp, old, adv, mask = _two_responses(A=(1.0, 1.0), extra_empty=True, pad=float("nan"))
    inp = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask}
    with batch(sub) as b:
        queued = []
        for per_token, exp_loss in ((False, -2.0 / 3.0), (True, -1.0)):
            lp = leaf(logp)
            queued.append((per_token, exp_loss, lp,
                           b.grpo_loss(lp, old, adv, mask, per_token_loss=per_token)))
    for per_token, exp_loss, lp, pending in queued:
        loss = pending.value
        what = f"grpo_loss, lengths 2, 8, 0 with A = 1, 1, 5, r = 1, per_token_loss={per_token}"
        _close(loss, exp_loss, what=what, inputs=inp, atol=1e-9,
               hints=[(-1.0, "the empty response was dropped from B; it must still count")])
        loss.backward()
        exp_grad = torch.zeros_like(logp)
        if per_token:
            exp_grad[0, :2] = -0.1
            exp_grad[1, :8] = -0.1
        else:
            exp_grad[0, :2] = -1.0 / 6.0
            exp_grad[1, :8] = -1.0 / 24.0
        _close(lp.grad, exp_grad, what=f"d {what} / d logp", inputs=inp, atol=1e-9)


@visible
def test_old_logp_and_advantages_are_frozen(sub):
    logp = torch.tensor([[-1.0, -0.4, -2.0], [-0.3, -1.2, -0.7]], dtype=F64)
    old0 = logp - torch.tensor([[0.1, -0.15, 0.05], [0.0, 0.12, -0.1]], dtype=F64)
    adv0 = torch.tensor([1.0, -0.5], dtype=F64)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    with batch(sub) as b:
        queued = []
        for per_token in (False, True):
            lp, old, adv = leaf(logp), leaf(old0), leaf(adv0)
            queued.append((per_token, lp, old, adv,
                           b.grpo_loss(lp, old, adv, mask, per_token_loss=per_token)))
    for per_token, lp, old, adv, pending in queued:
        loss = pending.value
        loss.backward()
        assert_no_grad(old, what=f"old_logp (per_token_loss={per_token})")
        assert_no_grad(adv, what=f"advantages (per_token_loss={per_token})")
        if lp.grad is None or not bool((lp.grad != 0).any()):
            raise Feedback(f"logp received no gradient (per_token_loss={per_token}): the ratio "
                           f"exp(logp - old_logp) must stay differentiable in logp")


def test_padding_is_neutralised(sub):
    base_logp = torch.tensor([[-1.0, -0.4, -2.0, -0.6], [-0.3, -1.2, -0.7, -0.9],
                              [-0.5, -0.5, -0.5, -0.5]], dtype=F64)
    base_old = base_logp - torch.tensor([[0.1, -0.4, 0.05, 0.3], [0.0, 0.25, -0.1, 0.2],
                                         [0.0, 0.0, 0.0, 0.0]], dtype=F64)
    adv = torch.tensor([1.0, -0.5, 2.0], dtype=F64)
    mask = torch.tensor([[True, True, False, False], [True, True, True, False],
                         [False, False, False, False]])
    with batch(sub) as b:
        queued = []
        for d, dtype in enumerate((F64, F32)):
            for per_token in (False, True):
                clean_lp = leaf(torch.where(mask, base_logp, torch.zeros_like(base_logp)).to(dtype))
                clean_old = torch.where(mask, base_old, torch.zeros_like(base_old)).to(dtype)
                pending_clean = b.grpo_loss(clean_lp, clean_old, adv.to(dtype), mask,
                                            per_token_loss=per_token)
                filled = []
                # each fill under one aggregation per dtype, the other one in the other dtype:
                # every fill meets both aggregations, every (dtype, aggregation) two fills
                fills = (float("nan"), float("inf"), float("-inf"), 1e30)
                for fill in [x for f, x in enumerate(fills) if (f + d + per_token) % 2 == 0]:
                    logp = torch.where(mask, base_logp, torch.full_like(base_logp, fill)).to(dtype)
                    old = torch.where(mask, base_old, torch.full_like(base_old, -fill)).to(dtype)
                    a = adv.to(dtype)
                    saved = (logp.clone(), old.clone(), a.clone(), mask.clone())
                    lp = leaf(logp)
                    filled.append((fill, logp, old, a, saved, lp,
                                   b.grpo_loss(lp, old, a, mask, per_token_loss=per_token)))
                queued.append((dtype, per_token, clean_lp, pending_clean, filled))
    # every loss first, then one backward for all of them (backward_all), then the gradients
    losses, whats, checked = [], [], []
    for dtype, per_token, clean_lp, pending_clean, filled in queued:
        clean = pending_clean.value
        losses.append(clean)
        whats.append(f"grpo_loss with zero padding ({dtype}, per_token_loss={per_token})")
        for fill, logp, old, a, saved, lp, pending in filled:
            inp = {"logp": logp, "old_logp": old, "advantages": a, "mask": mask}
            what = (f"grpo_loss with padding filled with {fill} ({str(dtype).replace('torch.', '')}, "
                    f"per_token_loss={per_token})")
            loss = pending.value
            if not bool(torch.isfinite(loss.detach()).all()):
                raise Feedback(f"{what}: the loss is {describe(loss)}; padded positions must not "
                               f"reach the result (use torch.where before subtracting or "
                               f"exponentiating, never x * mask)" + _inputs_text(inp))
            assert_close(loss, clean.detach(), what=f"{what} (vs zero padding)", inputs=inp)
            losses.append(loss)
            whats.append(what)
            checked.append((clean_lp, fill, logp, old, a, saved, lp, inp, what))
    backward_all(losses, whats)
    for clean_lp, fill, logp, old, a, saved, lp, inp, what in checked:
        g = lp.grad
        if g is None or not bool(torch.isfinite(g).all()) or bool((g[~mask] != 0).any()):
            raise Feedback(f"{what}: d loss / d logp must be finite and exactly 0 at padded "
                           f"positions, got {describe(g)}" + _inputs_text(inp))
        assert_close(g, clean_lp.grad, what=f"d {what} / d logp (vs zero padding)", inputs=inp)
        for name, before, after in zip(("logp", "old_logp", "advantages", "mask"), saved,
                                       (lp.detach(), old, a, mask)):
            if not torch.equal(torch.nan_to_num(before), torch.nan_to_num(after)) or \
                    not torch.equal(torch.isnan(before), torch.isnan(after)):
                raise Feedback(f"{what}: {name} was modified in place; leave the inputs as "
                               f"they are")


def _inputs_text(inp):
    return "\n  with " + "\n       ".join(f"{k} = {describe(v)}" for k, v in inp.items())


def test_float_mask_matches_bool_mask(sub):
    logp = torch.tensor([[-1.0, -0.4, -2.0], [-0.3, -1.2, -0.7]], dtype=F32)
    old = logp - torch.tensor([[0.3, -0.4, 0.05], [0.0, 0.25, -0.1]], dtype=F32)
    adv = torch.tensor([0.7, -1.3], dtype=F32)
    mask = torch.tensor([[True, False, True], [True, True, False]])
    with batch(sub) as calls:
        queued = [(per_token, calls.grpo_loss(logp, old, adv, mask, per_token_loss=per_token),
                   calls.grpo_loss(logp, old, adv, mask.to(F32), per_token_loss=per_token))
                  for per_token in (False, True)]
    for per_token, pa, pb in queued:
        a = pa.value
        b = pb.value
        assert_close(b, a.detach(), what=f"grpo_loss with a 0/1 float mask vs the same bool mask "
                     f"(per_token_loss={per_token})",
                     inputs={"logp": logp, "old_logp": old, "advantages": adv, "mask": mask})
