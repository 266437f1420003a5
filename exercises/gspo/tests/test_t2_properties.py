"""T2: the hand-checked GSPO cases, the geometric mean, invariance to duplicated tokens, the shape of
the gradient (equal per token when unclipped, zero when clipped), stop-gradients, padding, and
inputs left untouched.

Which test covers which class (issue 17): the hand-checked case, the geometric mean, duplication
invariance, the per-token gradient, detachment, padding and mutation. Long responses, large and
overflowing s, tiny probabilities and clip_eps used as given are in test_t2_extremes.py.
"""

import math

import torch

from judge.testing import (Feedback, assert_close, assert_no_grad, batch, check_tensor, describe, describe_inputs,
                           leaf, sibling, visible)

cases = sibling(__file__, "_cases")

LOG2 = math.log(2.0)


def _f64(values):
    return torch.tensor(values, dtype=torch.float64)


def _hand_checked(dtype, with_empty=False):
    """The three responses of the spec: log-ratios [log 2, -log 2] (A=1), [log 1.5] (A=2), [log 0.5] (A=-1)."""
    old = torch.tensor([[-1.0, -1.5], [-0.7, 0.0], [-2.0, 0.0]], dtype=torch.float64)
    ratio_logs = torch.tensor([[LOG2, -LOG2], [math.log(1.5), 0.0], [math.log(0.5), 0.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True], [True, False], [True, False]])
    adv = torch.tensor([1.0, 2.0, -1.0], dtype=torch.float64)
    if with_empty:
        old = torch.cat([old, torch.tensor([[-0.3, -0.4]], dtype=torch.float64)])
        ratio_logs = torch.cat([ratio_logs, torch.tensor([[0.9, -0.2]], dtype=torch.float64)])
        mask = torch.cat([mask, torch.tensor([[False, False]])])
        adv = torch.cat([adv, torch.tensor([5.0], dtype=torch.float64)])
    logp = torch.where(mask, old + ratio_logs, old)
    return logp.to(dtype), old.to(dtype), adv.to(dtype), mask


def _queue_loss(b, logp, old, adv, mask, **kw):
    """Queue gspo_loss on a fresh leaf copy of logp in the batch ``b``; ``_loss_and_grad`` reads it."""
    x = leaf(logp)
    return x, b.gspo_loss(x, old, adv, mask, **kw)


def _loss_and_grad(queued, logp, old, adv, mask):
    x, loss = queued
    loss = loss.value
    check_tensor(loss, what="gspo_loss", shape=(), dtype=logp.dtype)
    loss.backward()
    if x.grad is None:
        raise Feedback("gspo_loss: logp received no gradient (.grad is None) after loss.backward(); the loss must "
                       "reach logp through s_i" + describe_inputs({"logp": logp, "old_logp": old,
                                                                   "advantages": adv, "mask": mask}))
    return loss, x.grad


@visible
def test_hand_checked_three_responses(sub):
    with batch(sub) as b:
        queued = []
        for dtype in (torch.float64, torch.float32):
            logp, old, adv, mask = _hand_checked(dtype)
            queued.append((logp, old, adv, mask, b.sequence_ratio(logp, old, mask),
                           _queue_loss(b, logp, old, adv, mask, clip_eps=0.2)))
    for logp, old, adv, mask, s, loss in queued:
        inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask, "clip_eps": 0.2}
        assert_close(s.value, _f64([1.0, 1.5, 0.5]), what="sequence_ratio (hand-checked: s = [1, 1.5, 0.5])",
                     inputs=inputs)
        loss, grad = _loss_and_grad(loss, logp, old, adv, mask)
        assert_close(loss, _f64(-(1.0 + 2.4 - 0.8) / 3.0),
                     what="gspo_loss (hand-checked: -(1*1 + 1.2*2 + 0.8*(-1))/3 = -0.866667; response 2 is clipped "
                          "at 1+eps, response 3 at 1-eps)", inputs=inputs)
        expected = _f64([[-1 / 6, -1 / 6], [0.0, 0.0], [0.0, 0.0]])
        assert_close(grad, expected, what="d loss / d logp (hand-checked: -A s/(B n) = -1/6 on both tokens of "
                                          "response 1, 0 on the clipped responses)", inputs=inputs)


@visible
def test_hand_checked_with_an_empty_fourth_response(sub):
    with batch(sub) as b:
        queued = []
        for dtype in (torch.float64, torch.float32):
            logp, old, adv, mask = _hand_checked(dtype, with_empty=True)
            queued.append((logp, old, adv, mask, b.sequence_ratio(logp, old, mask),
                           _queue_loss(b, logp, old, adv, mask, clip_eps=0.2)))
    for logp, old, adv, mask, s, loss in queued:
        inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask, "clip_eps": 0.2}
        assert_close(s.value, _f64([1.0, 1.5, 0.5, 1.0]),
                     what="sequence_ratio (the empty 4th response has s = 1)", inputs=inputs)
        loss, grad = _loss_and_grad(loss, logp, old, adv, mask)
        assert_close(loss, _f64(-0.65),
                     what="gspo_loss with an empty 4th response (A=5): it adds 0 to the sum but counts in B, "
                          "-(1 + 2.4 - 0.8)/4 = -0.65 (-2.0 means it added min(A, A) = 5; -0.866667 means it "
                          "was dropped from B)", inputs=inputs)
        expected = _f64([[-1 / 8, -1 / 8], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
        assert_close(grad, expected, what="d loss / d logp with an empty 4th response (B = 4: -1/8 on response 1)",
                     inputs=inputs)


@visible
def test_token_ratios_2_and_1_give_sqrt2(sub):
    hint = ("s is the GEOMETRIC mean of the valid token ratios: exp(mean of valid log-ratios) = sqrt(2 * 1). "
            "2 means the product (no 1/n), 1.5 the arithmetic mean of the ratios, 2^(1/3) = 1.26 dividing by L "
            "instead of the number of valid tokens")
    queued = []
    with batch(sub) as b:
        for dtype in (torch.float64, torch.float32):
            variants = [
                (torch.tensor([[-1.0 + LOG2, -0.5]]), torch.tensor([[-1.0, -0.5]]), torch.tensor([[True, True]])),
                (torch.tensor([[-1.0 + LOG2, -0.5, -7.0]]), torch.tensor([[-1.0, -0.5, -0.1]]),
                 torch.tensor([[True, True, False]])),
                (torch.tensor([[-1.0 + LOG2, -3.0, -0.5]]), torch.tensor([[-1.0, -0.2, -0.5]]),
                 torch.tensor([[1.0, 0.0, 1.0]])),
            ]
            for logp, old, mask in variants:
                logp, old = logp.to(torch.float64).to(dtype), old.to(torch.float64).to(dtype)
                adv = torch.tensor([1.0], dtype=dtype)
                queued.append((logp, old, mask, adv, b.sequence_ratio(logp, old, mask),
                               _queue_loss(b, logp, old, adv, mask, clip_eps=0.5),
                               _queue_loss(b, logp, old, adv, mask, clip_eps=0.2)))
    for logp, old, mask, adv, s, loss_05, loss_02 in queued:
        inputs = {"logp": logp, "old_logp": old, "mask": mask}
        assert_close(s.value, _f64([math.sqrt(2.0)]), what=f"sequence_ratio for token ratios [2, 1] ({hint})",
                     inputs=inputs)
        n = int(mask.bool().sum())
        # eps = 0.5: sqrt(2) < 1.5 is inside the band, J = sqrt(2), every valid token gets -sqrt(2)/n
        loss, grad = _loss_and_grad(loss_05, logp, old, adv, mask)
        assert_close(loss, _f64(-math.sqrt(2.0)), what="gspo_loss with clip_eps=0.5, A=1 (unclipped: "
                     "-s = -sqrt(2))", inputs={**inputs, "advantages": adv})
        assert_close(grad, mask.to(torch.float64) * (-math.sqrt(2.0) / n),
                     what="d loss / d logp with clip_eps=0.5 (-A s/(B n) on each valid token)",
                     inputs={**inputs, "advantages": adv})
        # eps = 0.2: sqrt(2) > 1.2 with A > 0 is clipped, J = 1.2, no gradient
        loss, grad = _loss_and_grad(loss_02, logp, old, adv, mask)
        assert_close(loss, _f64(-1.2), what="gspo_loss with clip_eps=0.2, A=1 (clipped: -1.2)",
                     inputs={**inputs, "advantages": adv})
        assert_close(grad, torch.zeros_like(grad, dtype=torch.float64), atol=0.0, rtol=0.0,
                     what="d loss / d logp with clip_eps=0.2 (clipped response: exactly 0)",
                     inputs={**inputs, "advantages": adv})


def test_duplicating_every_valid_token_changes_nothing(sub, ctx):
    g = ctx.generator(201)
    queued = []
    with batch(sub) as b:
        for dtype, (B, L) in ((torch.float64, (4, 5)), (torch.float32, (3, 3)), (torch.float64, (5, 2))):
            logp, old, adv, mask = cases.random_batch(g, B, L, dtype, empty_row=B - 1)
            dup = [t.repeat_interleave(2, dim=1) for t in (logp, old, mask)]
            s, s2 = b.sequence_ratio(logp, old, mask), b.sequence_ratio(*dup)
            losses = [(eps, b.gspo_loss(logp, old, adv, mask, clip_eps=eps),
                       b.gspo_loss(dup[0], dup[1], adv, dup[2], clip_eps=eps)) for eps in (0.2, 0.05)]
            queued.append((dtype, B, logp, old, adv, mask, s, s2, losses))
    for dtype, B, logp, old, adv, mask, s, s2, losses in queued:
        inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask}
        s = s.value
        s2 = s2.value
        check_tensor(s2, what="sequence_ratio on the duplicated batch", shape=(B,), dtype=dtype)
        assert_close(s2, s, what="sequence_ratio after duplicating every token (a geometric mean does not "
                                 "change; a product squares)", inputs=inputs)
        for eps, loss, loss2 in losses:
            loss = loss.value
            loss2 = loss2.value
            check_tensor(loss2, what="gspo_loss on the duplicated batch", shape=(), dtype=dtype)
            assert_close(loss2, loss, what=f"gspo_loss (clip_eps={eps}) after duplicating every token "
                                           "(the loss is per response, not per token)", inputs=inputs)


def test_unclipped_responses_spread_one_gradient_over_their_tokens(sub, oracle, ctx):
    g = ctx.generator(202)
    queued = []
    with batch(sub) as b:
        for dtype, (B, L) in ((torch.float64, (5, 6)), (torch.float32, (4, 4))):
            logp, old, adv, mask = cases.random_batch(g, B, L, dtype, spread=0.08, noise=0.02, fill=math.nan)
            # The seed's hint: token ratios [2, 0.5] have s = 1, and both tokens get the same gradient.
            old[0, :2] = torch.tensor([-1.0, -0.5], dtype=dtype)
            logp[0, :2] = old[0, :2] + torch.tensor([LOG2, -LOG2], dtype=dtype)
            mask = mask.clone()
            mask[0] = False
            mask[0, :2] = True
            logp[0, 2:] = math.nan
            queued.append((B, logp, old, adv, mask, _queue_loss(b, logp, old, adv, mask, clip_eps=0.2)))
    for B, logp, old, adv, mask, loss in queued:
        inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask, "clip_eps": 0.2}
        s = oracle.sequence_ratio(logp, old, mask)
        n = mask.sum(dim=1).to(torch.float64)
        assert bool(((s > 0.8) & (s < 1.2)).all()), "test setup: every response is unclipped"
        expected = torch.where(mask, (-adv.to(torch.float64) * s / (B * n))[:, None], torch.zeros((), dtype=torch.float64))
        _, grad = _loss_and_grad(loss, logp, old, adv, mask)
        assert_close(grad, expected, what="d loss / d logp of unclipped responses (every valid token of response i "
                                          "gets the same -A_i s_i / (B n_i), whatever its own token ratio)",
                     inputs=inputs)


def test_pessimistic_min_clips_only_on_the_profitable_side(sub):
    # (A, s): A>0 & s>1+eps and A<0 & s<1-eps are clipped (zero gradient); the other two sides are not.
    rows = [(1.0, 1.5), (-1.0, 0.5), (1.0, 0.5), (-1.0, 1.5), (2.0, 1.1), (-0.5, 2.0)]
    B = len(rows)
    queued = []
    with batch(sub) as b:
        for dtype in (torch.float64, torch.float32):
            old = torch.tensor([[-1.0, -2.0, -0.5]] * B, dtype=torch.float64)
            mask = torch.tensor([[True, True, False]] * B)
            ratio_logs = torch.tensor([math.log(s) for _, s in rows], dtype=torch.float64)[:, None].expand(B, 3)
            logp = torch.where(mask, old + ratio_logs, torch.full_like(old, math.nan)).to(dtype)
            old = old.to(dtype)
            adv = torch.tensor([a for a, _ in rows], dtype=dtype)
            queued.append((logp, old, adv, mask, _queue_loss(b, logp, old, adv, mask, clip_eps=0.2)))
    for logp, old, adv, mask, loss in queued:
        inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask, "clip_eps": 0.2}
        expected_j = []
        expected_g = torch.zeros(B, 3, dtype=torch.float64)
        for i, (a, s) in enumerate(rows):
            clipped = (a > 0 and s > 1.2) or (a < 0 and s < 0.8)
            expected_j.append(min(s * a, min(max(s, 0.8), 1.2) * a))
            if not clipped:
                expected_g[i, :2] = -a * s / (B * 2)
        loss, grad = _loss_and_grad(loss, logp, old, adv, mask)
        assert_close(loss, _f64(-sum(expected_j) / B),
                     what="gspo_loss = -(1/B) sum_i min(s_i A_i, clip(s_i, 1-eps, 1+eps) A_i) (rows (A, s) = "
                          f"{rows})", inputs=inputs)
        assert_close(grad, expected_g, what="d loss / d logp: zero for A>0, s>1+eps and A<0, s<1-eps; "
                     "-A s/(B n) on the other side of the band, where min keeps the unclipped term",
                     inputs=inputs)
        for i, (a, s) in enumerate(rows):
            if ((a > 0 and s > 1.2) or (a < 0 and s < 0.8)) and bool((grad[i] != 0).any()):
                raise Feedback(f"response {i} (A={a}, s={s}) is clipped, so its gradient must be exactly 0, got "
                               f"{describe(grad[i])}{describe_inputs(inputs)}")


@visible
def test_old_logp_and_advantages_are_frozen_but_s_is_not(sub, oracle, ctx):
    g = ctx.generator(203)
    logp, old, adv, mask = cases.random_batch(g, 4, 5, torch.float64, spread=0.08, noise=0.02, fill=0.0,
                                             empty_row=2)
    inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask}
    x, o = leaf(logp), leaf(old)
    x2, o2, a2 = leaf(logp), leaf(old), leaf(adv)
    with batch(sub) as b:
        s = b.sequence_ratio(x, o, mask)
        loss = b.gspo_loss(x2, o2, a2, mask)
    # sequence_ratio: gradient to logp (ds_i/dlogp_it = s_i / n_i), none to old_logp
    s = s.value
    check_tensor(s, what="sequence_ratio", shape=(4,), dtype=torch.float64)
    if not s.requires_grad:
        raise Feedback("sequence_ratio must not detach s: the GSPO gradient reaches logp through s_i")
    s.sum().backward()
    assert_no_grad(o, what="old_logp (in sequence_ratio)")
    s_ref = oracle.sequence_ratio(logp, old, mask)
    n = mask.sum(dim=1).clamp(min=1).to(torch.float64)
    expected = torch.where(mask, (s_ref / n)[:, None], torch.zeros((), dtype=torch.float64))
    if x.grad is None:
        raise Feedback("sequence_ratio: logp received no gradient from s.sum().backward()" + describe_inputs(inputs))
    assert_close(x.grad, expected, what="d sum_i s_i / d logp (= s_i / n_i on valid tokens)", inputs=inputs)
    # gspo_loss: gradient to logp only
    x, o, a = x2, o2, a2
    loss = loss.value
    check_tensor(loss, what="gspo_loss", shape=(), dtype=torch.float64)
    loss.backward()
    assert_no_grad(o, what="old_logp (in gspo_loss)")
    assert_no_grad(a, what="advantages (in gspo_loss)")
    if x.grad is None:
        raise Feedback("gspo_loss: logp received no gradient" + describe_inputs(inputs))
    assert_close(x.grad, oracle.gspo_loss_grad(logp, old, adv, mask), what="d gspo_loss / d logp", inputs=inputs)


def test_padding_is_neutralised(sub, ctx):
    g = ctx.generator(204)
    queued = []
    with batch(sub) as b:
        for k, dtype in enumerate((torch.float64, torch.float32)):
            clean = cases.random_batch(g, 4, 5, dtype, fill=0.0, empty_row=1)
            logp0, old0, adv, mask = clean
            s0, loss0 = b.sequence_ratio(logp0, old0, mask), _queue_loss(b, logp0, old0, adv, mask)
            pad = ~mask
            padded = []
            for j, fill in enumerate(cases.FILLS):
                old_fill = cases.FILLS[(j + 1 + k) % len(cases.FILLS)]
                logp = logp0.masked_fill(pad, fill)
                old = old0.masked_fill(pad, old_fill)
                padded.append((fill, old_fill, logp, old, b.sequence_ratio(logp, old, mask),
                               _queue_loss(b, logp, old, adv, mask)))
            queued.append((logp0, old0, adv, mask, pad, s0, loss0, padded))
    for logp0, old0, adv, mask, pad, s0, loss0, padded in queued:
        s0 = s0.value
        loss0, grad0 = _loss_and_grad(loss0, logp0, old0, adv, mask)
        for fill, old_fill, logp, old, s, loss in padded:
            inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask}
            what = f"with padding filled with {fill} (logp) and {old_fill} (old_logp)"
            assert_close(s.value, s0, what=f"sequence_ratio {what} (must equal the result with padding 0)",
                         inputs=inputs)
            loss, grad = _loss_and_grad(loss, logp, old, adv, mask)
            assert_close(loss, loss0, what=f"gspo_loss {what} (must equal the result with padding 0)", inputs=inputs)
            bad = pad & (grad != 0) | torch.isnan(grad)
            if bool(bad.any()):
                idx = tuple(int(i) for i in bad.nonzero()[0].tolist())
                raise Feedback(f"d loss / d logp {what}: padded positions must get exactly 0 and no position may be "
                               f"NaN, got {float(grad[idx])} at {idx}; neutralise padding with torch.where before "
                               f"subtracting (x * mask turns NaN * 0 and inf * 0 into NaN)\n  got {describe(grad)}"
                               f"{describe_inputs(inputs)}")
            assert_close(grad, grad0, what=f"d loss / d logp {what}", inputs=inputs)


def test_inputs_are_not_mutated(sub, ctx):
    g = ctx.generator(205)
    queued = []
    with batch(sub) as b:
        for float_mask in (False, True):
            logp, old, adv, mask = cases.random_batch(g, 3, 4, torch.float64, fill=math.nan, old_fill=math.inf,
                                                      empty_row=0, float_mask=float_mask)
            before = [t.clone() for t in (logp, old, adv, mask)]
            queued.append((logp, old, adv, mask, before, b.sequence_ratio(logp, old, mask),
                           b.gspo_loss(logp, old, adv, mask)))
    # reading the results brings the calls' in-place changes back into the inputs, as a direct call does
    for logp, old, adv, mask, before, s, loss in queued:
        s.value
        loss.value
        for name, now, was in zip(("logp", "old_logp", "advantages", "mask"), (logp, old, adv, mask), before):
            if not cases.same_values(now, was):
                raise Feedback(f"{name} was modified in place by sequence_ratio/gspo_loss: it was {describe(was)}, "
                               f"afterwards {describe(now)} (build new tensors, e.g. torch.where, never "
                               f"masked_fill_ / index assignment on an input)")


def test_float_mask_equals_bool_mask(sub, ctx):
    g = ctx.generator(206)
    logp, old, adv, mask = cases.random_batch(g, 4, 6, torch.float64, fill=1e30, empty_row=3)
    inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask}
    mask_dtypes = (torch.float32, torch.float64)
    with batch(sub) as b:
        s_bool, loss_bool = b.sequence_ratio(logp, old, mask), b.gspo_loss(logp, old, adv, mask)  # once
        queued = [(b.sequence_ratio(logp, old, mask.to(mask_dtype)), b.gspo_loss(logp, old, adv, mask.to(mask_dtype)))
                  for mask_dtype in mask_dtypes]
    for mask_dtype, (s_fm, loss_fm) in zip(mask_dtypes, queued):
        assert_close(s_fm.value, s_bool.value,
                     what=f"sequence_ratio with a 0/1 {mask_dtype} mask vs the same bool mask", inputs=inputs)
        assert_close(loss_fm.value, loss_bool.value,
                     what=f"gspo_loss with a 0/1 {mask_dtype} mask vs the same bool mask", inputs=inputs)
