"""T0: return types, shapes, dtypes, empty masks and ValueErrors of the TIS functions.

Which test covers which class (issue 17):
- validation: test_shape_errors (incl. B = 1 with a 0-d or [1, 1] advantage, 1-D and 3-D inputs
  to both functions; an all-empty mask and an empty batch B = 0 do not skip it), test_bound_validation
  (each bad bound in both functions, two of them on a B = 0 batch: a B = 0 shortcut before the
  checks is shown wrong), test_valid_edge_bounds_accepted (low = high = 1, low = 0).
- empty masks: test_empty_mask (every mask kind, NaN/inf/1e30 padding under the empty mask, both
  aggregations, B = 0).
- mask dtypes beyond judge.cases.MASK_KINDS: test_other_mask_dtypes (judge.cases.OTHER_MASK_DTYPES:
  bfloat16, float16, uint8, int32; judge.cases.UNHELD_COUNTS: token counts 257, 557 and 2049,
  which bfloat16 / float16 cannot hold).
"""

import math

import torch

from judge import cases as jc
from judge.testing import Feedback, batch, check_count_loss, check_tensor, describe, expect_raises, leaf, visible

F32, F64 = torch.float32, torch.float64


def _inputs(B=2, L=3, dtype=F64):
    logp = torch.tensor([[-1.0, -0.5, -2.0], [-0.3, -1.2, -0.7]], dtype=dtype)[:B, :L]
    old = torch.tensor([[-1.1, -0.4, -2.2], [-0.2, -1.0, -0.9]], dtype=dtype)[:B, :L]
    rollout = torch.tensor([[-0.9, -0.6, -1.5], [-0.4, -1.6, -0.5]], dtype=dtype)[:B, :L]
    adv = torch.tensor([1.0, -0.5], dtype=dtype)[:B]
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.bool)[:B, :L]
    return logp, old, rollout, adv, mask


@visible
def test_weights_shape_dtype(sub):
    with batch(sub) as b:
        by_dtype = []
        for dtype in (F32, F64):
            _, old, rollout, _, mask = _inputs(dtype=dtype)
            by_dtype.append((dtype, b.tis_weights(old, rollout, mask)))
        # B != L with a float mask, and B == L
        old = torch.zeros(4, 2, dtype=F64)
        w42 = b.tis_weights(old, old - 0.1, torch.ones(4, 2, dtype=F64))
        w33 = b.tis_weights(torch.zeros(3, 3), torch.zeros(3, 3), torch.ones(3, 3, dtype=torch.bool))
    for dtype, pending in by_dtype:
        w = pending.value
        check_tensor(w, what=f"tis_weights({dtype})", shape=(2, 3), dtype=dtype)
        if w.requires_grad:
            raise Feedback("tis_weights must return a detached tensor (requires_grad=False)")
    check_tensor(w42.value, what="tis_weights on [4, 2] inputs", shape=(4, 2), dtype=F64)
    check_tensor(w33.value, what="tis_weights on [3, 3] inputs", shape=(3, 3), dtype=F32)


@visible
def test_loss_is_a_scalar_tensor(sub):
    with batch(sub) as b:
        queued = []
        for dtype in (F32, F64):
            for per_token in (True, False):
                logp, old, rollout, adv, mask = _inputs(dtype=dtype)
                lp = leaf(logp)
                queued.append((dtype, per_token,
                               b.tis_ppo_loss(lp, old, rollout, adv, mask, per_token_loss=per_token)))
    for dtype, per_token, pending in queued:
        loss = pending.value
        what = f"tis_ppo_loss({dtype}, per_token_loss={per_token})"
        check_tensor(loss, what=what, shape=(), dtype=dtype)
        if not loss.requires_grad:
            raise Feedback(f"{what} returned a tensor with requires_grad=False: the loss must "
                           f"stay connected to logp's graph (no .detach(), no .item())")
        if not math.isfinite(float(loss.detach())):
            raise Feedback(f"{what} returned {describe(loss)} on finite inputs")


@visible
def test_empty_mask(sub):
    with batch(sub) as b:
        queued = []
        for dtype in (F32, F64):
            for k, kind in enumerate(jc.MASK_KINDS):
                # the padding of an all-empty mask holds NaN/inf/1e30 too: logp * 0 is NaN there
                fill = jc.PADS[(k + (dtype == F64)) % len(jc.PADS)]
                logp, old, rollout, adv, _ = _inputs(dtype=dtype)
                logp, old, rollout = (torch.full_like(x, f) for x, f in ((logp, fill), (old, -fill), (rollout, fill)))
                empty = jc.as_mask(torch.zeros(2, 3, dtype=torch.bool), kind)
                pending_w = b.tis_weights(old, rollout, empty)
                losses = []
                for per_token in (True, False):
                    lp = leaf(logp)
                    losses.append((per_token, lp, b.tis_ppo_loss(lp, old, rollout, adv, empty,
                                                                 per_token_loss=per_token)))
                queued.append((dtype, pending_w, losses, (2, 3)))
            z = torch.zeros(0, 3, dtype=dtype)   # B = 0: no response at all
            none = torch.zeros(0, 3, dtype=torch.bool)
            losses = []
            for per_token in (True, False):
                lp = leaf(z)
                losses.append((per_token, lp, b.tis_ppo_loss(lp, z, z, torch.zeros(0, dtype=dtype), none,
                                                             per_token_loss=per_token)))
            queued.append((dtype, b.tis_weights(z, z, none), losses, (0, 3)))
    zeros = []   # every value first, then one backward for all the losses (independent ones)
    for dtype, pending_w, losses, shape in queued:
        w = pending_w.value
        check_tensor(w, what=f"tis_weights with an empty mask, shape {shape}", shape=shape, dtype=dtype)
        if bool((w != 0).any()):
            raise Feedback(f"tis_weights with an empty mask must be all zeros, got {describe(w)}")
        for per_token, lp, pending in losses:
            what = (f"tis_ppo_loss with an empty mask (per_token_loss={per_token}, {dtype}, shape {shape}, "
                    f"padding {float(lp.detach().reshape(-1)[0]) if lp.numel() else None})")
            loss = pending.value
            check_tensor(loss, what=what, shape=(), dtype=dtype)
            if float(loss.detach()) != 0.0:
                raise Feedback(f"{what} must be 0, got {describe(loss)}")
            if not loss.requires_grad:
                raise Feedback(f"{what} must be a graph-connected zero (requires_grad=True) "
                               f"so that .backward() works; got a detached tensor. Build it "
                               f"from logp (e.g. a masked sum divided by max(1, N))")
            zeros.append((loss, what, lp))
    torch.autograd.backward([loss for loss, _, _ in zeros])
    for _, what, lp in zeros:
        if lp.grad is None or bool((lp.grad != 0).any()) or not bool(torch.isfinite(lp.grad).all()):
            raise Feedback(f"{what}: after backward, logp.grad must be all zeros, got "
                           f"{describe(lp.grad)}")


@visible
def test_shape_errors(sub):
    logp, old, rollout, adv, mask = _inputs()
    with batch(sub) as b:
        bad = [
            (b.tis_weights(old, rollout[:, :2], mask),
             "tis_weights with old_logp [2, 3] and rollout_logp [2, 2]"),
            (b.tis_weights(old, rollout, mask[:1]),
             "tis_weights with a [1, 3] mask for [2, 3] log-probs"),
            (b.tis_weights(old[0], rollout[0], mask[0]),
             "tis_weights with 1-D inputs"),
            (b.tis_weights(old[None], rollout[None], mask[None]),
             "tis_weights with 3-D inputs"),
            # non-2-D inputs in the loss, with advantages of shape [logp.shape[0]], so that only
            # the 2-D check fires (a loss comparing shapes alone returns a number)
            (b.tis_ppo_loss(logp[0], old[0], rollout[0], torch.ones(3, dtype=F64), mask[0]),
             "tis_ppo_loss with 1-D inputs [3] and advantages [3]"),
            (b.tis_ppo_loss(logp[None], old[None], rollout[None], adv[:1], mask[None]),
             "tis_ppo_loss with 3-D inputs [1, 2, 3] and advantages [1]"),
            (b.tis_ppo_loss(logp, old, rollout, adv[:, None], mask),
             "tis_ppo_loss with advantages of shape [B, 1] instead of [B]"),
            (b.tis_ppo_loss(logp, old, rollout, adv[:1], mask),
             "tis_ppo_loss with 1 advantage for 2 responses"),
            (b.tis_ppo_loss(logp[:, :2], old, rollout, adv, mask),
             "tis_ppo_loss with logp [2, 2] and old_logp [2, 3]"),
            (b.tis_ppo_loss(logp, old, rollout[:1], adv, mask),
             "tis_ppo_loss with rollout_logp [1, 3] and logp [2, 3]"),
            (b.tis_ppo_loss(logp, old, rollout, adv, mask[:, :2]),
             "tis_ppo_loss with a [2, 2] mask for [2, 3] log-probs"),
            # B = 1: a 0-d or [1, 1] advantage has one element and would broadcast silently
            (b.tis_ppo_loss(logp[:1], old[:1], rollout[:1], adv[0], mask[:1]),
             "tis_ppo_loss with B = 1 and a 0-d advantage (advantages must be [B] = [1])"),
            (b.tis_ppo_loss(logp[:1], old[:1], rollout[:1], adv[:1, None], mask[:1]),
             "tis_ppo_loss with B = 1 and advantages of shape [1, 1]"),
            # an all-empty mask does not skip validation
            (b.tis_ppo_loss(logp, old, rollout, adv[:, None], torch.zeros_like(mask)),
             "tis_ppo_loss with an all-empty mask and advantages of shape [B, 1]"),
            (b.tis_weights(old, rollout[:, :2], torch.zeros_like(mask)[:, :2]),
             "tis_weights with an all-empty [2, 2] mask and old_logp [2, 3]"),
            (b.tis_ppo_loss(logp, old, rollout, adv, torch.zeros_like(mask), tis_low=3.0, tis_high=2.0),
             "tis_ppo_loss with an all-empty mask and tis_low > tis_high"),
            # nor does an empty batch (B = 0): advantages [0, 1] are not [B] = [0]
            (b.tis_ppo_loss(logp[:0], old[:0], rollout[:0], adv[:0, None], mask[:0]),
             "tis_ppo_loss with B = 0 and advantages of shape [0, 1]"),
        ]
    for pending, what in bad:
        expect_raises(ValueError, pending.get, what=what)


BAD_BOUNDS = [(-0.1, 2.0, "low < 0"), (2.5, 2.0, "low > high"), (0.0, math.inf, "high = inf"),
              (0.0, 0.0, "high = 0"), (0.0, -1.0, "high < 0"), (0.0, math.nan, "high = nan"),
              (math.nan, 2.0, "low = nan")]


@visible
def test_bound_validation(sub):
    logp, old, rollout, adv, mask = _inputs()
    # The "high < 0" and "low = nan" rows use an empty batch (B = 0, legal): a shortcut for B = 0
    # must not skip validation either (the other rows keep the [2, 3] batch).
    z0, a0, m0 = torch.zeros(0, 3, dtype=F64), torch.zeros(0, dtype=F64), torch.zeros(0, 3, dtype=torch.bool)
    with batch(sub) as b:
        queued = []
        for low, high, why in BAD_BOUNDS:
            b0 = why in ("high < 0", "low = nan")
            x, o, r, a, m = (z0, z0, z0, a0, m0) if b0 else (logp, old, rollout, adv, mask)
            queued.append((low, high, why + (", B = 0" if b0 else ""),
                           b.tis_weights(o, r, m, clip_low=low, clip_high=high),
                           b.tis_ppo_loss(x, o, r, a, m, tis_low=low, tis_high=high)))
    for low, high, why, pending_w, pending_loss in queued:
        expect_raises(ValueError, pending_w.get,
                      what=f"tis_weights(clip_low={low}, clip_high={high}) ({why})")
        expect_raises(ValueError, pending_loss.get,
                      what=f"tis_ppo_loss(tis_low={low}, tis_high={high}) ({why})")


def test_valid_edge_bounds_accepted(sub):
    # low = high = 1 (no correction) and low = 0 are legal.
    logp, old, rollout, adv, mask = _inputs()
    with batch(sub) as b:
        queued = [(low, high, b.tis_weights(old, rollout, mask, clip_low=low, clip_high=high),
                   b.tis_ppo_loss(leaf(logp), old, rollout, adv, mask, tis_low=low, tis_high=high))
                  for low, high in ((1.0, 1.0), (0.0, 0.5), (0.5, 0.5))]
    for low, high, pending_w, pending_loss in queued:
        w = pending_w.value
        check_tensor(w, what=f"tis_weights(clip_low={low}, clip_high={high})", shape=(2, 3),
                     dtype=F64)
        loss = pending_loss.value
        check_tensor(loss, what=f"tis_ppo_loss(tis_low={low}, tis_high={high})", shape=(),
                     dtype=F64)


# "0/1 in any float or integer dtype": every dtype of judge.cases.OTHER_MASK_DTYPES, on the token
# counts of judge.cases.UNHELD_COUNTS, which a bfloat16 or float16 mask cannot hold, so a count
# taken in the mask's own dtype (mask.sum().to(logp.dtype)) is off: rows of 257 and 300 valid
# tokens (bfloat16 rounds 257 to 256, and the batch's 557 to 556) and three full rows of 683
# (float16 rounds the total 2049 to 2048). A float dtype is graded under token-mean, and under
# seq-mean-token-mean too where a row's own count is one it cannot hold (bfloat16); the integer
# dtypes, which hold every count, alternate the aggregations.
def _rows(case: dict) -> tuple:
    return tuple(case[k] for k in ("logp", "old_logp", "rollout_logp", "advantages", "valid"))


def test_other_mask_dtypes(sub, ref):
    g = torch.Generator().manual_seed(2049)
    shared = jc.UNHELD_COUNTS[torch.bfloat16]  # the integer dtypes' counts
    made = {}
    plan = []
    for i, dt in enumerate(jc.OTHER_MASK_DTYPES):
        counts = list(jc.UNHELD_COUNTS.get(dt, shared))
        key = tuple(counts)
        if key not in made:
            made[key] = _rows(jc.count_case(g, counts))
        if dt.is_floating_point:
            row_unheld = any(float(torch.tensor(float(c), dtype=dt)) != c for c in counts)
            aggregations = (True, False) if row_unheld else (True,)
        else:
            aggregations = (i % 2 == 1,)
        plan += [(made[key], counts, dt, pt) for pt in aggregations]
    with batch(sub) as b:
        queued = [(case, counts, dt, pt, b.tis_ppo_loss(leaf(case[0]), *case[1:4], case[4].to(dt), per_token_loss=pt))
                  for case, counts, dt, pt in plan]
    distinct = {(id(case), pt): case for case, _, _, pt in plan}  # the dtypes sharing counts share one case
    want = {key: ref.tis_ppo_loss(*case, per_token_loss=key[1])  # while the submission runs
            for key, case in distinct.items()}
    for case, counts, dt, per_token, pending in queued:
        check_count_loss(pending.value, want[id(case), per_token], fn="tis_ppo_loss",
                         setting=f"per_token_loss={per_token}", mask_dtype=dt, counts=counts)
