"""T0: contracts. Shapes, dtypes, return types, ValueErrors and the empty mask.

Which test covers which class (issue 17):
- validation under every combination: test_shape_mismatches_raise_value_error (both functions,
  every bad shape; [1] advantages with B = 3, which broadcast; B = 1 with a 0-d or [1, 1]
  advantage; B = 0 with a 0-d advantage, which an early return for the empty batch skips),
  test_non_2d_inputs_raise_value_error,
  test_bad_widths_raise_value_error (each bad width in both functions).
- empty masks: test_empty_mask_gives_a_graph_connected_zero (every mask kind incl. float64 and
  int64, NaN/inf/1e30 padding under the empty mask, B = 0; and a non-empty mask whose every
  valid token is rejected, NaN padding: an "all rejected" shortcut must give the same zero; and
  one whose every advantage is 0: a fresh-zero shortcut leaves logp.grad None).
- mixed dtypes: test_mask_dtype_does_not_change_the_result_dtype (also bfloat16, float16, uint8
  and int32 masks on 2049 valid tokens, a count bfloat16/float16 cannot hold); float64 advantages with float32
  logp and int64 masks are in T1's seeded test.
"""

import math

import torch

from judge import cases as jc
from judge.testing import Feedback, assert_close, batch, check_tensor, describe, expect_raises, leaf, visible


def _inputs(g, B, L, dtype, bool_mask=True):
    logp = -(0.1 + 2 * torch.rand(B, L, generator=g, dtype=torch.float64))
    rollout = logp - 0.3 * torch.randn(B, L, generator=g, dtype=torch.float64)
    valid = torch.rand(B, L, generator=g) < 0.75
    valid[0, 0] = True
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    mask = valid if bool_mask else valid.to(dtype)
    return logp.to(dtype), rollout.to(dtype), adv.to(dtype), mask


@visible
def test_weights_shape_and_dtype(sub, ctx):
    g = ctx.generator(1)
    shapes = [(dtype, B, L) for dtype in (torch.float32, torch.float64) for B, L in ((2, 5), (3, 3))]
    with batch(sub) as b:
        outs = []
        for dtype, B, L in shapes:
            logp, rollout, _, mask = _inputs(g, B, L, dtype)
            outs.append(b.masked_is_weights(logp, rollout, mask))
    for (dtype, B, L), out in zip(shapes, outs):
        check_tensor(out.value, what=f"masked_is_weights on {dtype} inputs of shape [{B}, {L}]",
                     shape=(B, L), dtype=dtype)


@visible
def test_loss_is_a_scalar_tensor_in_the_input_dtype(sub, ctx):
    g = ctx.generator(2)
    dtypes = (torch.float32, torch.float64)
    with batch(sub) as b:
        outs = []
        for dtype in dtypes:
            logp, rollout, adv, mask = _inputs(g, 3, 4, dtype)
            outs.append(b.offpolicy_loss(leaf(logp), rollout, adv, mask))
    for dtype, pending in zip(dtypes, outs):
        out = pending.value
        check_tensor(out, what=f"offpolicy_loss on {dtype} inputs", shape=(), dtype=dtype)
        if not out.requires_grad:
            raise Feedback(f"offpolicy_loss on {dtype} inputs returned a tensor with no autograd graph "
                           f"(requires_grad=False) although logp requires grad: do not detach the loss "
                           f"or build it from .item() values")


# Mask dtypes beyond judge.cases.MASK_KINDS (jc.OTHER_MASK_DTYPES), on N = 2049 valid tokens:
# bfloat16 and float16 cannot hold 2049 (both round it to 2048), so a token count taken in the
# mask's own dtype (mask.sum().to(logp.dtype)) is off by 1/2049.


def test_mask_dtype_does_not_change_the_result_dtype(sub, ref, ctx):
    g = ctx.generator(3)
    logp, rollout, adv, mask = _inputs(g, 2, 3, torch.float32)
    mask64 = mask.to(torch.float64)
    big = _inputs(g, 3, 683, torch.float64)[:3]  # 2049 tokens, every one valid
    big_valid = torch.ones(3, 683, dtype=torch.bool)
    with batch(sub) as b:
        w = b.masked_is_weights(logp, rollout, mask64)
        loss = b.offpolicy_loss(leaf(logp), rollout, adv, mask64)
        others = [(dt, b.offpolicy_loss(leaf(big[0]), big[1], big[2], big_valid.to(dt)))
                  for dt in jc.OTHER_MASK_DTYPES]
    expected = ref.offpolicy_loss(big[0], big[1], big[2], big_valid)  # while the submission runs
    check_tensor(w.value, what="masked_is_weights with float32 log-probs and a float64 0/1 mask",
                 shape=(2, 3), dtype=torch.float32)
    check_tensor(loss.value, what="offpolicy_loss with float32 log-probs and a float64 0/1 mask "
                 "(count the tokens in logp's dtype)", shape=(), dtype=torch.float32)
    for dt, pending in others:
        what = (f"offpolicy_loss with a {dt} 0/1 mask, 2049 valid tokens (float64 log-probs): N = 2049"
                + (f", which {dt} cannot hold (count the tokens as integers, or in logp's dtype)"
                   if dt.is_floating_point else ""))
        out = check_tensor(pending.value, what=what, shape=(), dtype=torch.float64)
        assert_close(out, expected, what=what, inputs={"mask dtype": str(dt), "N": 2049})


@visible
def test_shape_mismatches_raise_value_error(sub, ctx):
    g = ctx.generator(4)
    logp, rollout, adv, mask = _inputs(g, 3, 4, torch.float64)
    bad = {
        "rollout_logp of shape [3, 5]": dict(rollout_logp=torch.zeros(3, 5, dtype=torch.float64)),
        "rollout_logp of shape [4, 3] (transposed)": dict(rollout_logp=rollout.t().contiguous()),
        "mask of shape [3, 3]": dict(mask=mask[:, :3]),
        "mask of shape [3, 4, 1]": dict(mask=mask[..., None]),
    }
    bad_adv = {"advantages of shape [3, 1]": adv[:, None], "advantages of shape [4]": torch.zeros(4),
               "advantages of shape [] (a scalar)": adv[0],
               "advantages of shape [1] (one advantage shared by every response)": adv[:1]}
    with batch(sub) as b:
        calls = []
        for what, change in bad.items():
            kw = dict(logp=logp, rollout_logp=rollout, mask=mask) | change
            calls.append((b.masked_is_weights(kw["logp"], kw["rollout_logp"], kw["mask"]),
                          f"masked_is_weights with logp [3, 4] and {what}"))
            calls.append((b.offpolicy_loss(kw["logp"], kw["rollout_logp"], adv, kw["mask"]),
                          f"offpolicy_loss with logp [3, 4] and {what}"))
        for what, a in bad_adv.items():
            calls.append((b.offpolicy_loss(logp, rollout, a, mask),
                          f"offpolicy_loss with logp [3, 4] and {what} (advantages must be [B] = [3])"))
        # B = 1: a 0-d or [1, 1] advantage has the right number of elements and broadcasts silently
        one = (logp[:1], rollout[:1], mask[:1])
        calls.append((b.offpolicy_loss(*one[:2], adv[0], one[2]),
                      "offpolicy_loss with logp [1, 4] and a 0-d advantage (advantages must be [B] = [1])"))
        calls.append((b.offpolicy_loss(*one[:2], adv[:1, None], one[2]),
                      "offpolicy_loss with logp [1, 4] and advantages of shape [1, 1]"))
        # an all-empty mask does not skip validation, nor does an empty batch (B = 0: a 0-d
        # advantage is not [B] = [0]; an early return for B = 0 before the check accepted it)
        calls.append((b.offpolicy_loss(logp[:0], rollout[:0], adv[0], mask[:0]),
                      "offpolicy_loss with an empty batch (logp [0, 4]) and a 0-d advantage (advantages must be [B] = [0])"))
        none = torch.zeros_like(mask)
        calls.append((b.offpolicy_loss(logp, rollout, adv[:, None], none),
                      "offpolicy_loss with an all-empty mask and advantages of shape [3, 1]"))
        calls.append((b.masked_is_weights(logp, rollout[:, :3], none[:, :3]),
                      "masked_is_weights with an all-empty mask of shape [3, 3] and logp [3, 4]"))
        calls.append((b.offpolicy_loss(logp, rollout, adv, none, clip_low=0.0),
                      "offpolicy_loss with an all-empty mask and clip_low=0"))
        calls.append((b.masked_is_weights(logp, rollout, none, clip_high=math.inf),
                      "masked_is_weights with an all-empty mask and clip_high=inf"))
    for pending, what in calls:
        expect_raises(ValueError, pending.get, what=what)


@visible
def test_non_2d_inputs_raise_value_error(sub, ctx):
    g = ctx.generator(5)
    logp, rollout, adv, mask = _inputs(g, 2, 3, torch.float64)
    flat = (logp[0], rollout[0], mask[0])
    cube = (logp[None], rollout[None], mask[None])
    with batch(sub) as b:
        calls = [(b.masked_is_weights(*flat),
                  "masked_is_weights with 1-D inputs of shape [3] (inputs must be [B, L])"),
                 (b.offpolicy_loss(flat[0], flat[1], adv[:1], flat[2]),
                  "offpolicy_loss with 1-D inputs of shape [3] and advantages [1]"),
                 # advantages [L] pass a 'shape [logp.shape[0]]' test: only the 2-D check fires
                 (b.offpolicy_loss(flat[0], flat[1], torch.ones(3, dtype=torch.float64), flat[2]),
                  "offpolicy_loss with 1-D inputs of shape [3] and advantages [3]"),
                 (b.masked_is_weights(*cube),
                  "masked_is_weights with 3-D inputs of shape [1, 2, 3]"),
                 (b.offpolicy_loss(cube[0], cube[1], adv[:1], cube[2]),
                  "offpolicy_loss with 3-D inputs of shape [1, 2, 3] and advantages [1]")]
    for pending, what in calls:
        expect_raises(ValueError, pending.get, what=what)


@visible
def test_bad_widths_raise_value_error(sub, ctx):
    g = ctx.generator(6)
    logp, rollout, adv, mask = _inputs(g, 2, 3, torch.float64)
    bad = [(0.0, 0.2), (1.0, 0.2), (-0.1, 0.2), (1.5, 0.2), (math.nan, 0.2),
           (0.2, 0.0), (0.2, -0.2), (0.2, math.inf), (0.2, math.nan)]
    with batch(sub) as b:
        calls = [(b.masked_is_weights(logp, rollout, mask, clip_low=cl, clip_high=ch),
                  b.offpolicy_loss(logp, rollout, adv, mask, clip_low=cl, clip_high=ch)) for cl, ch in bad]
    for (cl, ch), (weights, loss) in zip(bad, calls):
        expect_raises(ValueError, weights.get,
                      what=f"masked_is_weights with clip_low={cl}, clip_high={ch} "
                           f"(need 0 < clip_low < 1 and a finite clip_high > 0)")
        expect_raises(ValueError, loss.get, what=f"offpolicy_loss with clip_low={cl}, clip_high={ch}")


def test_valid_widths_are_accepted(sub, ctx):
    g = ctx.generator(7)
    logp, rollout, adv, mask = _inputs(g, 2, 3, torch.float64)
    widths = ((0.999, 1e6), (1e-6, 1e-6), (0.5, 3.0))
    with batch(sub) as b:
        calls = [(b.masked_is_weights(logp, rollout, mask, clip_low=cl, clip_high=ch),
                  b.offpolicy_loss(logp, rollout, adv, mask, clip_low=cl, clip_high=ch)) for cl, ch in widths]
    for (cl, ch), (weights, loss) in zip(widths, calls):
        try:
            weights.value
            loss.value
        except ValueError as e:
            raise Feedback(f"clip_low={cl}, clip_high={ch} are valid widths (0 < clip_low < 1, "
                           f"clip_high finite and > 0), but a ValueError was raised: {e}") from None


@visible
def test_empty_mask_gives_a_graph_connected_zero(sub, ctx):
    g = ctx.generator(8)
    cases = []
    with batch(sub) as b:
        for dtype in (torch.float32, torch.float64):
            for k, kind in enumerate(jc.MASK_KINDS):
                # the padding of an all-empty mask holds NaN, inf or 1e30 too: logp * 0 is NaN there
                fill = jc.PADS[(k + (dtype == torch.float64)) % len(jc.PADS)]
                logp, rollout, adv, _ = _inputs(g, 2, 3, dtype)
                logp, rollout = torch.full_like(logp, fill), torch.full_like(rollout, -fill)
                mask = jc.as_mask(torch.zeros(2, 3, dtype=torch.bool), kind)
                lp = leaf(logp)
                cases.append((dtype, f"{kind} mask, padding {fill}", lp, b.offpolicy_loss(lp, rollout, adv, mask),
                              b.masked_is_weights(logp, rollout, mask), (2, 3)))
            # an empty batch (B = 0) has no valid token either
            lp = leaf(torch.zeros(0, 3, dtype=dtype))
            empty = torch.zeros(0, 3, dtype=dtype)
            cases.append((dtype, "B = 0 (no response at all)", lp,
                          b.offpolicy_loss(lp, empty, torch.zeros(0, dtype=dtype), torch.zeros(0, 3, dtype=torch.bool)),
                          b.masked_is_weights(empty, empty, torch.zeros(0, 3, dtype=torch.bool)), (0, 3)))
        # a non-empty mask whose every valid token is rejected (log-ratios +-1: ratios e and 1/e,
        # outside (0.8, 1.2)), NaN padding: the loss is the same connected zero; an "all rejected"
        # shortcut returning (logp * 0).sum() is NaN here
        lr = torch.tensor([[1.0, -1.0, 0.0], [-1.0, 0.0, 1.0]], dtype=torch.float64)
        valid = lr != 0
        logp = torch.where(valid, torch.full((2, 3), -0.5, dtype=torch.float64), math.nan)
        lp = leaf(logp.to(torch.float32))
        rollout = torch.where(valid, logp - lr, math.nan).to(torch.float32)
        cases.append((torch.float32, "rejected", lp,
                      b.offpolicy_loss(lp, rollout, torch.tensor([1.0, -2.0]), valid.to(torch.float32)), None, (2, 3)))
        # the same tokens with log-ratios 0 (all kept) but every advantage 0 (a GRPO group with
        # equal rewards): a fresh torch.zeros((), requires_grad=True) shortcut leaves logp.grad None
        lp = leaf(logp.to(torch.float32))
        cases.append((torch.float32, "zero advantages", lp,
                      b.offpolicy_loss(lp, logp.to(torch.float32), torch.zeros(2), valid), None, (2, 3)))
    for dtype, kind, lp, loss, w, shape in cases:
        what = (f"offpolicy_loss with 4 valid tokens, every one rejected (log-ratios +-1), NaN padding ({dtype})"
                if kind == "rejected" else
                f"offpolicy_loss with 4 valid tokens, every advantage 0, NaN padding ({dtype})"
                if kind == "zero advantages" else f"offpolicy_loss with an all-zero mask ({kind}, {dtype})")
        loss = loss.value
        check_tensor(loss, what=what, shape=(), dtype=dtype)
        if not bool(loss.detach() == 0):
            raise Feedback(f"{what}: expected exactly 0 (every weight is 0; the denominator is "
                           f"max(1, N)), got {describe(loss)}")
        if not loss.requires_grad:
            raise Feedback(f"{what}: the zero must stay connected to logp's graph "
                           f"(requires_grad=True), got a detached tensor such as torch.tensor(0.)")
        loss.backward()
        if lp.grad is None or bool((lp.grad != 0).any()):
            raise Feedback(f"{what}: after loss.backward() logp.grad should be all zeros, "
                           f"got {describe(lp.grad)}")
        if w is None:
            continue
        w = w.value
        check_tensor(w, what=f"masked_is_weights with an all-zero mask ({kind}, {dtype})", shape=shape, dtype=dtype)
        if bool((w != 0).any()) or not bool(torch.isfinite(w).all()):
            raise Feedback(f"masked_is_weights with an all-zero mask: expected all zeros, got {describe(w)}")
