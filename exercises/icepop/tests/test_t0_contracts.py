"""T0: return types, shapes, dtypes, empty masks and ValueErrors of the IcePop functions.

Which test covers which class (issue 17; the regimes are in test_t2_regimes.py):
- test_weights_shape_dtype / test_loss_is_a_scalar_tensor: shapes (B != L, B == L), dtype
  preservation, a scalar () loss on the graph, for both aggregations.
- test_empty_mask: all-empty bool and float masks, both aggregations, graph-connected zero;
  also a non-empty mask with every advantage 0 (a fresh-zero shortcut leaves logp.grad None).
  (NaN/inf padding under an all-empty mask, int64 masks and B = 0: test_t2_regimes.)
- test_shape_errors: every shape rule in both functions (1-D and 3-D inputs to both; advantages
  [B, 1] and [1, B]). (The same rules with an all-empty mask, and B = 1 with a 0-d advantage:
  test_t2_regimes.test_validation_with_empty_masks.)
- test_other_mask_dtypes: bfloat16 / float16 / uint8 / int32 0/1 masks (judge.cases
  OTHER_MASK_DTYPES) on rows whose token counts bfloat16 / float16 cannot hold (557, 2049),
  both aggregations, against the reference: a count taken in the mask's dtype is off.
- test_bound_validation / test_valid_edge_bounds_accepted: the band rule in both functions,
  NaN included; the legal edges low = 0 and low = high.
Input mutation is checked on every call by the judge (judge.readonly), in every branch.
"""

import math

import torch

from judge import cases as shared
from judge.testing import Feedback, batch, check_count_loss, check_tensor, describe, expect_raises, leaf, sibling, visible

cases = sibling(__file__, "_cases")

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
        typed = []
        for dtype in (F32, F64):
            _, old, rollout, _, mask = _inputs(dtype=dtype)
            typed.append((dtype, b.icepop_weights(old, rollout, mask)))
        # B != L with a float mask, and B == L
        old = torch.zeros(4, 2, dtype=F64)
        w42 = b.icepop_weights(old, old - 0.1, torch.ones(4, 2, dtype=F64))
        w33 = b.icepop_weights(torch.zeros(3, 3), torch.zeros(3, 3), torch.ones(3, 3, dtype=torch.bool))
    for dtype, p in typed:
        w = p.value
        check_tensor(w, what=f"icepop_weights({dtype})", shape=(2, 3), dtype=dtype)
        if w.requires_grad:
            raise Feedback("icepop_weights must return a detached tensor (requires_grad=False)")
    check_tensor(w42.value, what="icepop_weights on [4, 2] inputs", shape=(4, 2), dtype=F64)
    check_tensor(w33.value, what="icepop_weights on [3, 3] inputs", shape=(3, 3), dtype=F32)


@visible
def test_loss_is_a_scalar_tensor(sub):
    with batch(sub) as b:
        calls = []
        for dtype in (F32, F64):
            for per_token in (True, False):
                logp, old, rollout, adv, mask = _inputs(dtype=dtype)
                lp = leaf(logp)
                calls.append((dtype, per_token,
                              b.icepop_ppo_loss(lp, old, rollout, adv, mask, per_token_loss=per_token)))
    for dtype, per_token, p in calls:
        loss = p.value
        what = f"icepop_ppo_loss({dtype}, per_token_loss={per_token})"
        check_tensor(loss, what=what, shape=(), dtype=dtype)
        if not loss.requires_grad:
            raise Feedback(f"{what} returned a tensor with requires_grad=False: the loss must "
                           f"stay connected to logp's graph (no .detach(), no .item())")
        if not math.isfinite(float(loss.detach())):
            raise Feedback(f"{what} returned {describe(loss)} on finite inputs")


@visible
def test_empty_mask(sub):
    with batch(sub) as b:
        calls = []  # (dtype, weights, [(per_token, logp leaf, loss)]) in the order they are checked
        for dtype in (F32, F64):
            logp, old, rollout, adv, _ = _inputs(dtype=dtype)
            for empty in (torch.zeros(2, 3, dtype=torch.bool), torch.zeros(2, 3, dtype=dtype)):
                w = b.icepop_weights(old, rollout, empty)
                losses = []
                for per_token in (True, False):
                    lp = leaf(logp)
                    losses.append((per_token, lp, b.icepop_ppo_loss(lp, old, rollout, adv, empty,
                                                                    per_token_loss=per_token)))
                calls.append((dtype, w, losses))
        # a non-empty mask whose advantages are all 0 (a GRPO group with equal rewards), NaN in
        # the padding: still a graph-connected zero with zero gradients, not a fresh
        # torch.zeros((), requires_grad=True) shortcut (logp.grad stays None) nor logp * 0 (NaN)
        logp, old, rollout, adv, mask = _inputs(dtype=F32)
        logp = torch.where(mask, logp, torch.tensor(float("nan")))
        lp = leaf(logp)
        zero_adv = (lp, b.icepop_ppo_loss(lp, old, rollout, torch.zeros_like(adv), mask))
    zeros = []   # every value first, then one backward for all the losses (independent ones)
    lp, p = zero_adv
    loss = p.value
    what = "icepop_ppo_loss with all advantages 0 (non-empty mask, NaN padding)"
    check_tensor(loss, what=what, shape=(), dtype=F32)
    if float(loss.detach()) != 0.0 or not loss.requires_grad:
        raise Feedback(f"{what} must be a zero connected to logp's graph, got {describe(loss)}")
    zeros.append((loss, what, lp))
    for dtype, pw, losses in calls:
        w = pw.value
        check_tensor(w, what="icepop_weights with an empty mask", shape=(2, 3), dtype=dtype)
        if bool((w != 0).any()):
            raise Feedback(f"icepop_weights with an empty mask must be all zeros, got {describe(w)}")
        for per_token, lp, p in losses:
            what = f"icepop_ppo_loss with an empty mask (per_token_loss={per_token}, {dtype})"
            loss = p.value
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
        if lp.grad is None or bool((lp.grad != 0).any()):
            raise Feedback(f"{what}: after backward, logp.grad must be all zeros, got "
                           f"{describe(lp.grad)}")


@visible
def test_shape_errors(sub):
    logp, old, rollout, adv, mask = _inputs()
    with batch(sub) as b:
        calls = [
            (b.icepop_weights(old, rollout[:, :2], mask),
             "icepop_weights with old_logp [2, 3] and rollout_logp [2, 2]"),
            (b.icepop_weights(old, rollout, mask[:1]),
             "icepop_weights with a [1, 3] mask for [2, 3] log-probs"),
            (b.icepop_weights(old[0], rollout[0], mask[0]),
             "icepop_weights with 1-D inputs"),
            (b.icepop_weights(old[None], rollout[None], mask[None]),
             "icepop_weights with 3-D inputs"),
            (b.icepop_ppo_loss(logp, old, rollout, adv[:, None], mask),
             "icepop_ppo_loss with advantages of shape [B, 1] instead of [B]"),
            (b.icepop_ppo_loss(logp, old, rollout, adv[:1], mask),
             "icepop_ppo_loss with 1 advantage for 2 responses"),
            # [1, B]: its last dimension is B, so a check of shape[-1] (then a flatten) passes it
            (b.icepop_ppo_loss(logp, old, rollout, adv[None], mask),
             "icepop_ppo_loss with advantages of shape [1, B] instead of [B]"),
            (b.icepop_ppo_loss(logp[:, :2], old, rollout, adv, mask),
             "icepop_ppo_loss with logp [2, 2] and old_logp [2, 3]"),
            (b.icepop_ppo_loss(logp, old, rollout[:1], adv, mask),
             "icepop_ppo_loss with rollout_logp [1, 3] and logp [2, 3]"),
            (b.icepop_ppo_loss(logp, old, rollout, adv, mask[:, :2]),
             "icepop_ppo_loss with a [2, 2] mask for [2, 3] log-probs"),
            # non-2-D inputs whose shapes agree, with advantages of length shape[0]: a loss that
            # only compares shapes (and computes its own weights, skipping icepop_weights'
            # 2-D check) broadcasts them into a value
            (b.icepop_ppo_loss(logp[0], old[0], rollout[0], torch.zeros(3, dtype=F64), mask[0]),
             "icepop_ppo_loss with 1-D [3] inputs and advantages [3]"),
            (b.icepop_ppo_loss(logp[None], old[None], rollout[None], adv[:1], mask[None]),
             "icepop_ppo_loss with 3-D [1, 2, 3] inputs and advantages [1]"),
        ]
    for p, what in calls:
        expect_raises(ValueError, p.get, what=what)


BAD_BOUNDS = [(-0.1, 2.0, "low < 0"), (2.5, 2.0, "low > high"), (0.0, math.inf, "high = inf"),
              (0.0, 0.0, "high = 0"), (0.0, -1.0, "high < 0"), (0.0, math.nan, "high = nan"),
              (math.nan, 2.0, "low = nan")]


@visible
def test_bound_validation(sub):
    logp, old, rollout, adv, mask = _inputs()
    with batch(sub) as b:
        calls = [(low, high, why,
                  b.icepop_weights(old, rollout, mask, low=low, high=high),
                  b.icepop_ppo_loss(logp, old, rollout, adv, mask, low=low, high=high))
                 for low, high, why in BAD_BOUNDS]
    for low, high, why, w, loss in calls:
        expect_raises(ValueError, w.get, what=f"icepop_weights(low={low}, high={high}) ({why})")
        expect_raises(ValueError, loss.get, what=f"icepop_ppo_loss(low={low}, high={high}) ({why})")


def test_valid_edge_bounds_accepted(sub):
    # A degenerate band (low = high) and low = 0 are legal; the first band is given as the ints
    # (1, 1): an int edge is a legal number, not a ValueError
    logp, old, rollout, adv, mask = _inputs()
    with batch(sub) as b:
        calls = [(low, high, b.icepop_weights(old, rollout, mask, low=low, high=high),
                  b.icepop_ppo_loss(leaf(logp), old, rollout, adv, mask, low=low, high=high))
                 for low, high in ((1, 1), (0.0, 0.5), (0.5, 0.5))]
    for low, high, w, loss in calls:
        check_tensor(w.value, what=f"icepop_weights(low={low}, high={high})", shape=(2, 3),
                     dtype=F64)
        check_tensor(loss.value, what=f"icepop_ppo_loss(low={low}, high={high})", shape=(),
                     dtype=F64)


# "0/1 in any float or integer dtype": token counts a bfloat16 or float16 mask cannot hold, so a
# count taken in the mask's own dtype (mask.sum()) is off. Small case [2, 300]: 257 and 300 valid
# tokens (bfloat16 rounds 257 to 256, and the batch's 557 to 556) with bfloat16 masks under both
# aggregations and an int32 one; large case [3, 683], all 2049 valid (float16 rounds 2049 to
# 2048) with float16 and uint8 masks, token-mean.
def _rows(case: dict) -> tuple:
    return tuple(case[k] for k in ("logp", "old_logp", "rollout_logp", "advantages", "valid"))


def test_other_mask_dtypes(sub, ref):
    g = torch.Generator().manual_seed(2049)
    small_counts, large_counts = list(shared.UNHELD_COUNTS[torch.bfloat16]), list(shared.UNHELD_COUNTS[torch.float16])
    small = _rows(shared.count_case(g, small_counts))
    large = _rows(shared.count_case(g, large_counts))
    bf16, f16 = torch.bfloat16, torch.float16
    plan = [(small, small_counts, bf16, True), (small, small_counts, bf16, False),
            (small, small_counts, torch.int32, False), (large, large_counts, f16, True),
            (large, large_counts, torch.uint8, True)]
    assert {dt for _, _, dt, _ in plan} == set(shared.OTHER_MASK_DTYPES)
    with batch(sub) as b:
        queued = [(case, counts, dt, pt, b.icepop_ppo_loss(leaf(case[0]), *case[1:4], case[4].to(dt),
                                                           per_token_loss=pt))
                  for case, counts, dt, pt in plan]
    # while the submission runs: per case, both aggregations' expected losses from one
    # vectorised pass over the reference's weights (_cases.closed_form), counts in float64
    want = {}
    for case in {id(c): c for c, _, _, _ in plan}.values():
        lp, old, rollout, adv, valid = case
        for pt, (loss, _) in cases.closed_form(ref.icepop_weights(old, rollout, valid), lp, old, adv,
                                               valid).items():
            want[id(case), pt] = loss
    for case, counts, dt, per_token, pending in queued:
        check_count_loss(pending.value, want[id(case), per_token], fn="icepop_ppo_loss", setting=f"per_token_loss={per_token}",
                         mask_dtype=dt, counts=counts)
