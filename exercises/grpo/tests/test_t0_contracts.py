"""T0: return types, shapes, dtypes, ValueErrors and the empty-mask zero.

Which test covers which class (issue 17):
- validation: test_grpo_loss_rejects_bad_shapes (incl. B = 1 with a 0-d or [1, 1] advantage),
  test_group_advantages_rejects_bad_group_size, test_group_advantages_rejects_non_1d_rewards.
- all-zero advantages (a shortcut returning a fresh, disconnected zero): test_grpo_loss_returns_scalar_in_input_dtype,
  in both dtypes and both aggregations.
- empty masks: test_empty_mask_gives_graph_connected_zero (both aggregations, every mask kind,
  NaN/inf/1e30 padding under the empty mask, B = 0).
- N = 0 rewards: test_t2_extremes.test_rewards_with_a_large_offset_float32.
- mask dtypes beyond judge.cases.MASK_KINDS: test_other_mask_dtypes (bfloat16, float16, uint8,
  int32; both aggregations; token counts 257, 557 and 2049, which bfloat16 / float16 cannot hold).
"""

from __future__ import annotations

import torch

from judge import cases as jc
from judge.testing import Feedback, batch, check_count_loss, check_tensor, describe, expect_raises, leaf, visible

F32, F64 = torch.float32, torch.float64


def _loss_inputs(dtype, B=2, L=3):
    logp = torch.tensor([[-1.0, -0.5, -2.0], [-0.3, -1.2, -0.7]], dtype=dtype)[:B, :L]
    old = logp - torch.tensor([[0.1, -0.2, 0.05], [0.0, 0.3, -0.1]], dtype=dtype)[:B, :L]
    adv = torch.tensor([1.0, -0.5], dtype=dtype)[:B]
    mask = torch.tensor([[True, True, False], [True, False, False]])[:B, :L]
    return logp, old, adv, mask


@visible
def test_group_advantages_returns_n_in_input_dtype(sub):
    with batch(sub) as b:
        calls = []
        for dtype in (F64, F32):
            rewards = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5, 1.0], dtype=dtype)
            for G in (3, 6, 1):
                calls.append((dtype, rewards, G, b.group_advantages(rewards, G)))
    for dtype, rewards, G, pending in calls:
        out = pending.value
        check_tensor(out, what=f"group_advantages(rewards [6] {dtype}, group_size={G})",
                     shape=(6,), dtype=dtype)
        if not bool(torch.isfinite(out).all()):
            hint = (" (with group_size=1 every group is constant: its centred reward is 0 and "
                    "sigma + eps = eps > 0, so A = 0; an unbiased std divides by G - 1 = 0)"
                    if G == 1 else "")
            raise Feedback(f"group_advantages(rewards, {G}) returned non-finite values "
                           f"{describe(out)} for rewards {describe(rewards)}{hint}")


@visible
def test_group_advantages_rejects_bad_group_size(sub):
    rewards = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5, 1.0], dtype=F64)
    with batch(sub) as b:
        p4, p5, p0, pm2 = (b.group_advantages(rewards, G) for G in (4, 5, 0, -2))
        # N = 0 is a multiple of every group_size, but group_size <= 0 is still invalid there
        # (an early return for empty rewards must not skip the checks)
        e0, em3 = (b.group_advantages(torch.zeros(0, dtype=F64), G) for G in (0, -3))
    expect_raises(ValueError, p4.get,
                  what="group_advantages with N=6 rewards and group_size=4 (6 % 4 != 0)")
    expect_raises(ValueError, p5.get,
                  what="group_advantages with N=6 rewards and group_size=5 (6 % 5 != 0)")
    expect_raises(ValueError, p0.get,
                  what="group_advantages with group_size=0")
    expect_raises(ValueError, pm2.get,
                  what="group_advantages with group_size=-2 (6 % -2 == 0 in Python, still invalid)")
    expect_raises(ValueError, e0.get, what="group_advantages with N=0 rewards and group_size=0")
    expect_raises(ValueError, em3.get, what="group_advantages with N=0 rewards and group_size=-3")


@visible
def test_group_advantages_rejects_non_1d_rewards(sub):
    with batch(sub) as b:
        p2d = b.group_advantages(torch.zeros(2, 4, dtype=F64), 4)
        p81 = b.group_advantages(torch.zeros(8, 1, dtype=F64), 4)
        p0d = b.group_advantages(torch.tensor(1.0, dtype=F64), 1)
        p04 = b.group_advantages(torch.zeros(0, 4, dtype=F64), 4)    # empty, but 2-D
    expect_raises(ValueError, p2d.get,
                  what="group_advantages with 2-D rewards of shape (2, 4)")
    expect_raises(ValueError, p81.get,
                  what="group_advantages with rewards of shape (8, 1)")
    expect_raises(ValueError, p0d.get,
                  what="group_advantages with 0-dim rewards")
    expect_raises(ValueError, p04.get,
                  what="group_advantages with empty 2-D rewards of shape (0, 4) (not 1-D, although empty)")


@visible
def test_grpo_loss_returns_scalar_in_input_dtype(sub):
    with batch(sub) as b:
        calls = []
        for dtype in (F64, F32):
            for per_token in (False, True):
                logp, old, adv, mask = _loss_inputs(dtype)
                if (dtype == F32) != per_token:   # all-zero advantages in each dtype and each
                    adv = torch.zeros_like(adv)   # aggregation: the zero loss is still connected
                lp = leaf(logp)
                calls.append((dtype, per_token, lp,
                              b.grpo_loss(lp, old, adv, mask, per_token_loss=per_token)))
    zeros = []   # (the zero-advantage losses: one backward for both)
    for dtype, per_token, lp, pending in calls:
        out = pending.value
        zero_adv = ", advantages all 0" if (dtype == F32) != per_token else ""
        what = f"grpo_loss(B=2, L=3, {dtype}, per_token_loss={per_token}{zero_adv})"
        check_tensor(out, what=what, shape=(), dtype=dtype)
        if not out.requires_grad:
            raise Feedback(f"{what} returned a tensor with requires_grad=False: the loss must stay "
                           f"connected to logp's graph (no .detach(), no torch.no_grad, no .item())")
        if zero_adv:
            zeros.append((what, lp, out))
    torch.autograd.backward([out for _, _, out in zeros])
    for what, lp, _ in zeros:
        if lp.grad is None or bool((lp.grad != 0).any()):
            raise Feedback(f"{what}: expected a zero loss connected to logp (backward() gives an "
                           f"all-zero logp.grad), got logp.grad = {describe(lp.grad)}: a fresh "
                           f"torch.zeros(()) for zero advantages is not connected to logp's graph")


@visible
def test_grpo_loss_rejects_bad_shapes(sub):
    logp, old, adv, mask = _loss_inputs(F64)
    bad = [
        ("advantages of shape [B, 1] = (2, 1)", (logp, old, adv.unsqueeze(-1), mask)),
        ("advantages of length 3 for B=2", (logp, old, torch.tensor([1.0, 2.0, 3.0], dtype=F64), mask)),
        ("1-D logp / old_logp / mask of shape (3,)", (logp[0], old[0], adv[:1], mask[0])),
        ("3-D logp / old_logp / mask of shape (1, 2, 3)",
         (logp[None], old[None], adv, mask[None])),
        ("old_logp of shape (2, 2) with logp (2, 3)", (logp, old[:, :2], adv, mask)),
        ("mask of shape (2, 2) with logp (2, 3)", (logp, old, adv, mask[:, :2])),
        ("logp of shape (1, 3) with old_logp and mask (2, 3)", (logp[:1], old, adv, mask)),
        # B = 1: a 0-d or [1, 1] advantage has one element and would broadcast silently
        ("B = 1 and a 0-d advantage (advantages must be [B] = (1,))", (logp[:1], old[:1], adv[0], mask[:1])),
        ("B = 1 and advantages of shape (1, 1)", (logp[:1], old[:1], adv[:1, None], mask[:1])),
        # an all-empty mask does not skip validation
        ("an all-empty mask and advantages of shape (2, 1)", (logp, old, adv[:, None], torch.zeros_like(mask))),
        ("an all-empty mask of shape (2, 2) with logp (2, 3)", (logp, old, adv, torch.zeros_like(mask)[:, :2])),
        # nor does an empty batch (B = 0): an early return for it must come after the checks
        ("B = 0 and a mask of shape (0, 2) with logp (0, 3)", (logp[:0], old[:0], adv[:0], mask[:0, :2])),
        ("B = 0 and advantages of shape (0, 1)", (logp[:0], old[:0], adv[:0, None], mask[:0])),
    ]
    with batch(sub) as b:
        outs = [b.grpo_loss(*args) for _, args in bad]
    for (what, _), pending in zip(bad, outs):
        expect_raises(ValueError, pending.get, what=f"grpo_loss with {what}")


@visible
def test_empty_mask_gives_graph_connected_zero(sub):
    with batch(sub) as b:
        calls = []
        for dtype in (F64, F32):
            for k, kind in enumerate(jc.MASK_KINDS):
                for per_token in (False, True):
                    # the padding of an all-empty mask holds NaN/inf/1e30 too: logp * 0 is NaN there
                    fill = jc.PADS[(2 * k + per_token + (dtype == F32)) % len(jc.PADS)]
                    logp, old, adv, _ = _loss_inputs(dtype)
                    logp, old = torch.full_like(logp, fill), torch.full_like(old, -fill)
                    mask = jc.as_mask(torch.zeros(2, 3, dtype=torch.bool), kind)
                    lp = leaf(logp)
                    calls.append((dtype, f"{kind} mask, padding {fill}, per_token_loss={per_token}", lp,
                                  b.grpo_loss(lp, old, adv, mask, per_token_loss=per_token)))
            for per_token in (False, True):   # B = 0: no response at all
                lp = leaf(torch.zeros(0, 3, dtype=dtype))
                calls.append((dtype, f"B = 0, per_token_loss={per_token}", lp,
                              b.grpo_loss(lp, torch.zeros(0, 3, dtype=dtype), torch.zeros(0, dtype=dtype),
                                          torch.zeros(0, 3, dtype=torch.bool), per_token_loss=per_token)))
    outs = []   # every value first, then one backward for all of them (independent losses)
    for dtype, per_token, lp, pending in calls:
        what = f"grpo_loss with an all-zero mask ({dtype}, {per_token})"
        out = check_tensor(pending.value, what=what, shape=(), dtype=dtype)
        if float(out.detach()) != 0.0:
            raise Feedback(f"{what}: expected 0, got {describe(out)}")
        if not out.requires_grad:
            raise Feedback(f"{what}: expected a graph-connected zero (requires_grad=True) so that "
                           f"loss.backward() works on an all-padding batch; got requires_grad=False "
                           f"(e.g. torch.tensor(0.) or a detached result)")
        outs.append(out)
    torch.autograd.backward(outs)
    for dtype, per_token, lp, pending in calls:
        what = f"grpo_loss with an all-zero mask ({dtype}, {per_token})"
        if lp.grad is None:
            raise Feedback(f"{what}: backward() left logp.grad = None; the zero must depend on logp")
        if bool((lp.grad != 0).any()) or not bool(torch.isfinite(lp.grad).all()):
            raise Feedback(f"{what}: expected an all-zero gradient, got {describe(lp.grad)}")


def _count_case(g, counts):
    """judge.cases.count_case's logp, old_logp, advantages and valid mask, NaN in the padding."""
    c = jc.count_case(g, counts)
    return jc.pad(c["logp"], c["valid"], float("nan")), jc.pad(c["old_logp"], c["valid"], float("nan")), \
        c["advantages"], c["valid"]


def test_other_mask_dtypes(sub, ref):
    """"0/1 in any float or integer dtype": bfloat16, float16, uint8 and int32 masks
    (judge.cases.OTHER_MASK_DTYPES) give the loss of the bool mask, in logp's dtype. The rows are
    long enough that counting tokens in the mask's own dtype goes wrong: bfloat16 holds neither
    a row of 257 nor a batch of 557, float16 not 2049 (judge.cases.UNHELD_COUNTS)."""
    g = torch.Generator().manual_seed(2049)
    small, large = _count_case(g, [257, 300]), _count_case(g, [683] * 3)
    plan = [(small, [257, 300], torch.bfloat16, True), (small, [257, 300], torch.bfloat16, False),
            (small, [257, 300], torch.uint8, False), (large, [683] * 3, torch.float16, True),
            (large, [683] * 3, torch.int32, True)]
    with batch(sub) as b:
        queued = [(case, counts, dt, pt, b.grpo_loss(leaf(case[0]), *case[1:3], case[3].to(dt), per_token_loss=pt))
                  for case, counts, dt, pt in plan]
    distinct = {(id(case), pt): case for case, _, _, pt in plan}  # computed while the submission runs
    want = {key: ref.grpo_loss(*case, per_token_loss=key[1]) for key, case in distinct.items()}
    for case, counts, dt, per_token, pending in queued:
        check_count_loss(pending.value, want[id(case), per_token], fn="grpo_loss", setting=f"per_token_loss={per_token}",
                         mask_dtype=dt, counts=counts)
