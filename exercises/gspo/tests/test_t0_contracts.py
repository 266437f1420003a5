"""T0: what gspo's two functions return (type, shape, dtype, graph), which inputs they reject, and
what an all-empty mask gives."""

import torch

from judge.testing import Feedback, check_tensor, describe, expect_raises, leaf, visible


def _inputs(B, L, dtype, mask_dtype=torch.bool):
    logp = torch.linspace(-2.0, -0.1, B * L, dtype=dtype).reshape(B, L)
    old = logp - 0.05 * torch.arange(B * L, dtype=dtype).reshape(B, L) / max(B * L, 1)
    mask = torch.ones(B, L, dtype=torch.bool)
    if L > 1:
        mask[0, -1] = False
    adv = torch.linspace(-1.0, 1.5, B, dtype=dtype)
    return logp, old, adv, mask.to(mask_dtype)


@visible
def test_sequence_ratio_returns_one_ratio_per_response(sub):
    for B, L in ((3, 5), (4, 4), (2, 1)):
        for dtype in (torch.float32, torch.float64):
            logp, old, _, mask = _inputs(B, L, dtype)
            # shape [B]: one ratio per response (not [B, L], not [B, 1]), in the input dtype
            out = sub.sequence_ratio(logp, old, mask)
            check_tensor(out, what=f"sequence_ratio on [{B}, {L}] {dtype} inputs", shape=(B,), dtype=dtype)


@visible
def test_gspo_loss_returns_a_scalar_tensor(sub):
    for B, L in ((3, 5), (4, 4)):
        for dtype in (torch.float32, torch.float64):
            logp, old, adv, mask = _inputs(B, L, dtype)
            out = sub.gspo_loss(logp, old, adv, mask)
            check_tensor(out, what=f"gspo_loss on [{B}, {L}] {dtype} inputs (default clip_eps)", shape=(), dtype=dtype)
            out = sub.gspo_loss(logp, old, adv, mask, clip_eps=0.1)
            check_tensor(out, what=f"gspo_loss(..., clip_eps=0.1) on [{B}, {L}] {dtype} inputs", shape=(), dtype=dtype)


@visible
def test_outputs_stay_connected_to_logp(sub):
    logp, old, adv, mask = _inputs(3, 4, torch.float64)
    x = leaf(logp)
    s = sub.sequence_ratio(x, old, mask)
    check_tensor(s, what="sequence_ratio", shape=(3,))
    if not s.requires_grad:
        raise Feedback("sequence_ratio returned a tensor without a graph (requires_grad=False) although logp "
                       "requires grad: s_i is NOT detached in GSPO, the gradient of the loss reaches logp "
                       "through s_i")
    x = leaf(logp)
    loss = sub.gspo_loss(x, old, adv, mask)
    check_tensor(loss, what="gspo_loss", shape=())
    if not loss.requires_grad:
        raise Feedback("gspo_loss returned a tensor without a graph (requires_grad=False) although logp requires "
                       "grad: do not detach s_i, do not call .item() or build a new tensor from the value")


@visible
def test_bool_and_float_masks_are_accepted(sub):
    for mask_dtype in (torch.bool, torch.float32, torch.float64):
        logp, old, adv, mask = _inputs(3, 4, torch.float64, mask_dtype)
        check_tensor(sub.sequence_ratio(logp, old, mask), what=f"sequence_ratio with a {mask_dtype} mask",
                     shape=(3,), dtype=torch.float64)
        check_tensor(sub.gspo_loss(logp, old, adv, mask), what=f"gspo_loss with a {mask_dtype} mask",
                     shape=(), dtype=torch.float64)


@visible
def test_shape_mismatches_raise_value_error(sub):
    logp, old, adv, mask = _inputs(3, 4, torch.float64)
    bad = [
        ("old_logp of shape (3, 5)", logp, torch.zeros(3, 5, dtype=torch.float64), adv, mask),
        ("old_logp of shape (2, 4)", logp, old[:2], adv, mask),
        ("mask of shape (3, 3)", logp, old, adv, mask[:, :3]),
        ("mask of shape (4, 4)", logp, old, adv, torch.ones(4, 4, dtype=torch.bool)),
        ("1-D logp, old_logp, mask of shape (4,)", logp[0], old[0], adv[:1], mask[0]),
        ("3-D logp, old_logp, mask of shape (3, 4, 1)", logp[..., None], old[..., None], adv, mask[..., None]),
    ]
    for what, lp, ol, a, m in bad:
        expect_raises(ValueError, sub.sequence_ratio, lp, ol, m, what=f"sequence_ratio with {what}")
        expect_raises(ValueError, sub.gspo_loss, lp, ol, a, m, what=f"gspo_loss with {what}")
    for what, a in (("advantages of shape (3, 1)", adv[:, None]),
                    ("advantages of shape (4,)", torch.zeros(4, dtype=torch.float64)),
                    ("advantages of shape (1,)", adv[:1]),
                    ("advantages of shape () (a scalar)", adv[0]),
                    ("advantages of shape (3, 4) (per-token: that is GSPO-token)", torch.zeros(3, 4, dtype=torch.float64))):
        expect_raises(ValueError, sub.gspo_loss, logp, old, a, mask,
                      what=f"gspo_loss with logp of shape (3, 4) and {what}")


@visible
def test_empty_responses(sub):
    # One empty response among others: its ratio is exactly 1.
    logp, old, adv, mask = _inputs(3, 4, torch.float64)
    mask = mask.clone()
    mask[1] = False
    s = sub.sequence_ratio(logp, old, mask)
    check_tensor(s, what="sequence_ratio", shape=(3,))
    if float(s[1]) != 1.0:
        raise Feedback(f"sequence_ratio of an empty response (no valid token) must be exactly 1, got {describe(s)} "
                       f"for mask {describe(mask)} (divide by max(n_i, 1), never by 0)")
    # An all-empty mask: ratios all 1, the loss a graph-connected zero whose gradients are 0.
    for mask_dtype in (torch.bool, torch.float32):
        logp, old, adv, _ = _inputs(3, 4, torch.float64)
        empty = torch.zeros(3, 4, dtype=mask_dtype)
        s = sub.sequence_ratio(logp, old, empty)
        check_tensor(s, what="sequence_ratio with an all-empty mask", shape=(3,), dtype=torch.float64)
        if not bool((s == 1).all()):
            raise Feedback(f"sequence_ratio with an all-empty mask must be all ones, got {describe(s)}")
        x = leaf(logp)
        loss = sub.gspo_loss(x, old, adv, empty)
        check_tensor(loss, what="gspo_loss with an all-empty mask", shape=(), dtype=torch.float64)
        if float(loss.detach()) != 0.0:
            raise Feedback(f"gspo_loss with an all-empty mask must be 0, got {describe(loss)} with advantages "
                           f"{describe(adv)}: an empty response contributes 0 (the indicator 1[n_i > 0]), "
                           f"not min(A_i, A_i) = A_i")
        if not loss.requires_grad:
            raise Feedback("gspo_loss with an all-empty mask must still be connected to logp's graph "
                           "(requires_grad=True), e.g. a sum over zero contributions, not torch.tensor(0.)")
        loss.backward()
        if x.grad is None or not bool((x.grad == 0).all()):
            raise Feedback(f"with an all-empty mask, logp's gradient must exist and be all zeros, got "
                           f"{describe(x.grad)}")
