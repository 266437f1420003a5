"""T0: what gspo's two functions return (type, shape, dtype, graph), which inputs they reject, and
what an all-empty mask gives.

Which test covers which class (issue 17):
- validation: test_shape_mismatches_raise_value_error (both functions, incl. B = 1 with a 0-d or
  [1, 1] advantage and per-token advantages).
- all-zero advantages (a fresh, disconnected zero as a shortcut): test_outputs_stay_connected_to_logp.
- empty masks: test_empty_responses (every mask kind, NaN/inf/1e30 padding under the empty mask,
  both dtypes, B = 0).
- mask dtypes beyond judge.cases.MASK_KINDS: test_other_mask_dtypes (bfloat16, float16, uint8,
  int32; rows of 257 and 2049 valid tokens, which bfloat16 / float16 cannot count).
"""

import torch

from judge import cases as jc
from judge.testing import Feedback, assert_close, batch, check_tensor, describe, expect_raises, leaf, visible


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
    shapes = [(B, L, dtype) for B, L in ((3, 5), (4, 4), (2, 1)) for dtype in (torch.float32, torch.float64)]
    with batch(sub) as b:
        outs = []
        for B, L, dtype in shapes:
            logp, old, _, mask = _inputs(B, L, dtype)
            outs.append(b.sequence_ratio(logp, old, mask))
    for (B, L, dtype), out in zip(shapes, outs):
        # shape [B]: one ratio per response (not [B, L], not [B, 1]), in the input dtype
        check_tensor(out.value, what=f"sequence_ratio on [{B}, {L}] {dtype} inputs", shape=(B,), dtype=dtype)


@visible
def test_gspo_loss_returns_a_scalar_tensor(sub):
    shapes = [(B, L, dtype) for B, L in ((3, 5), (4, 4)) for dtype in (torch.float32, torch.float64)]
    with batch(sub) as b:
        outs = []
        for B, L, dtype in shapes:
            logp, old, adv, mask = _inputs(B, L, dtype)
            outs.append((b.gspo_loss(logp, old, adv, mask), b.gspo_loss(logp, old, adv, mask, clip_eps=0.1)))
    for (B, L, dtype), (default, eps) in zip(shapes, outs):
        check_tensor(default.value, what=f"gspo_loss on [{B}, {L}] {dtype} inputs (default clip_eps)", shape=(),
                     dtype=dtype)
        check_tensor(eps.value, what=f"gspo_loss(..., clip_eps=0.1) on [{B}, {L}] {dtype} inputs", shape=(),
                     dtype=dtype)


@visible
def test_outputs_stay_connected_to_logp(sub):
    logp, old, adv, mask = _inputs(3, 4, torch.float64)
    with batch(sub) as b:
        s = b.sequence_ratio(leaf(logp), old, mask)
        loss = b.gspo_loss(leaf(logp), old, adv, mask)
        # all-zero advantages (no learning signal): still a loss connected to logp, not a shortcut
        # returning a fresh torch.zeros(()) (float32 here, float64 above)
        lp0 = leaf(logp.float())
        zero_adv = b.gspo_loss(lp0, old.float(), torch.zeros_like(adv, dtype=torch.float32), mask)
    s = s.value
    check_tensor(s, what="sequence_ratio", shape=(3,))
    if not s.requires_grad:
        raise Feedback("sequence_ratio returned a tensor without a graph (requires_grad=False) although logp "
                       "requires grad: s_i is NOT detached in GSPO, the gradient of the loss reaches logp "
                       "through s_i")
    loss = loss.value
    check_tensor(loss, what="gspo_loss", shape=())
    if not loss.requires_grad:
        raise Feedback("gspo_loss returned a tensor without a graph (requires_grad=False) although logp requires "
                       "grad: do not detach s_i, do not call .item() or build a new tensor from the value")
    what = "gspo_loss with advantages all 0 (float32)"
    zero = check_tensor(zero_adv.value, what=what, shape=(), dtype=torch.float32)
    if zero.requires_grad:
        zero.backward()
    if not zero.requires_grad or lp0.grad is None or bool((lp0.grad != 0).any()):
        raise Feedback(f"{what}: expected a zero connected to logp's graph (requires_grad=True, backward() "
                       f"gives an all-zero logp.grad), got {describe(zero)} with logp.grad = "
                       f"{describe(lp0.grad)}: a fresh torch.zeros(()) for zero advantages has no graph")


@visible
def test_bool_and_float_masks_are_accepted(sub):
    mask_dtypes = (torch.bool, torch.float32, torch.float64)
    with batch(sub) as b:
        outs = []
        for mask_dtype in mask_dtypes:
            logp, old, adv, mask = _inputs(3, 4, torch.float64, mask_dtype)
            outs.append((b.sequence_ratio(logp, old, mask), b.gspo_loss(logp, old, adv, mask)))
    for mask_dtype, (s, loss) in zip(mask_dtypes, outs):
        check_tensor(s.value, what=f"sequence_ratio with a {mask_dtype} mask",
                     shape=(3,), dtype=torch.float64)
        check_tensor(loss.value, what=f"gspo_loss with a {mask_dtype} mask",
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
        # an empty batch (B = 0) does not skip validation: an early return for it comes after the checks
        ("B = 0 and a mask of shape (0, 3) with logp (0, 4)", logp[:0], old[:0], adv[:0], mask[:0, :3]),
    ]
    bad_adv = (("advantages of shape (3, 1)", adv[:, None]),
               ("advantages of shape (4,)", torch.zeros(4, dtype=torch.float64)),
               ("advantages of shape (1,)", adv[:1]),
               ("advantages of shape () (a scalar)", adv[0]),
               ("advantages of shape (3, 4) (per-token: that is GSPO-token)", torch.zeros(3, 4, dtype=torch.float64)))
    with batch(sub) as b:
        calls = []
        for what, lp, ol, a, m in bad:
            calls.append((b.sequence_ratio(lp, ol, m), f"sequence_ratio with {what}"))
            calls.append((b.gspo_loss(lp, ol, a, m), f"gspo_loss with {what}"))
        for what, a in bad_adv:
            calls.append((b.gspo_loss(logp, old, a, mask), f"gspo_loss with logp of shape (3, 4) and {what}"))
        # B = 1: a 0-d or [1, 1] advantage has one element and would broadcast silently
        for what, a in (("a 0-d advantage", adv[0]), ("advantages of shape (1, 1)", adv[:1, None])):
            calls.append((b.gspo_loss(logp[:1], old[:1], a, mask[:1]),
                          f"gspo_loss with logp of shape (1, 4) and {what} (advantages must be [B] = (1,))"))
        # an all-empty mask does not skip validation
        none = torch.zeros_like(mask)
        calls.append((b.gspo_loss(logp, old, adv[:, None], none),
                      "gspo_loss with an all-empty mask and advantages of shape (3, 1)"))
        calls.append((b.sequence_ratio(logp, old[:, :3], none[:, :3]),
                      "sequence_ratio with an all-empty mask of shape (3, 3) and logp (3, 4)"))
        calls.append((b.gspo_loss(logp[:0], old[:0], adv[:0, None], mask[:0]),
                      "gspo_loss with B = 0 and advantages of shape (0, 1)"))
    for pending, what in calls:
        expect_raises(ValueError, pending.get, what=what)


@visible
def test_empty_responses(sub):
    # One empty response among others: its ratio is exactly 1.
    logp, old, adv, mask = _inputs(3, 4, torch.float64)
    mask = mask.clone()
    mask[1] = False
    mask_dtypes = (torch.bool, torch.float32)
    with batch(sub) as b:
        one_empty = b.sequence_ratio(logp, old, mask)
        all_empty = []
        for k, kind in enumerate(jc.MASK_KINDS):
            for dtype in (torch.float64, torch.float32):
                # the padding of an all-empty mask holds NaN/inf/1e30 too: logp * 0 is NaN there
                fill = jc.PADS[(k + (dtype == torch.float32)) % len(jc.PADS)]
                logp_, old_, adv_, _ = _inputs(3, 4, dtype)
                logp_, old_ = torch.full_like(logp_, fill), torch.full_like(old_, -fill)
                empty = jc.as_mask(torch.zeros(3, 4, dtype=torch.bool), kind)
                x = leaf(logp_)
                all_empty.append((adv_, x, b.sequence_ratio(logp_, old_, empty), b.gspo_loss(x, old_, adv_, empty)))
        # B = 0: no response at all; and L = 0 (float32): three responses, none with a position,
        # so every s_i is 1 (an early return for numel() == 0 must still give [B] ones)
        for dtype, (B0, L0) in ((torch.float64, (0, 4)), (torch.float32, (0, 4)), (torch.float32, (3, 0))):
            z, none = torch.zeros(B0, L0, dtype=dtype), torch.zeros(B0, L0, dtype=torch.bool)
            x = leaf(z)
            a0 = torch.linspace(-1.0, 2.0, B0, dtype=dtype)
            all_empty.append((a0, x, b.sequence_ratio(z, z, none), b.gspo_loss(x, z, a0, none)))
    s = one_empty.value
    check_tensor(s, what="sequence_ratio", shape=(3,))
    if float(s[1]) != 1.0:
        raise Feedback(f"sequence_ratio of an empty response (no valid token) must be exactly 1, got {describe(s)} "
                       f"for mask {describe(mask)} (divide by max(n_i, 1), never by 0)")
    # An all-empty mask: ratios all 1, the loss a graph-connected zero whose gradients are 0.
    for adv, x, s, loss in all_empty:
        s = s.value
        B = x.shape[0]
        check_tensor(s, what=f"sequence_ratio with an all-empty mask ({B} responses)", shape=(B,), dtype=x.dtype)
        if not bool((s == 1).all()):
            raise Feedback(f"sequence_ratio with an all-empty mask must be all ones, got {describe(s)}")
        loss = loss.value
        check_tensor(loss, what=f"gspo_loss with an all-empty mask ({B} responses)", shape=(), dtype=x.dtype)
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


def _count_case(g, B, L, n_valid):
    """float64 inputs of shape [B, L] whose row i has its first n_valid[i] tokens valid (mean
    log-ratios inside and outside the band, both signs of advantage) and NaN padding."""
    F64 = torch.float64
    logp = -(0.05 + 2 * torch.rand(B, L, generator=g, dtype=F64))
    old = logp - torch.linspace(0.1, -0.3, B, dtype=F64)[:, None] - 0.1 * torch.randn(B, L, generator=g, dtype=F64)
    adv = torch.linspace(1.0, -0.5, B, dtype=F64)
    valid = torch.arange(L)[None, :] < torch.tensor(n_valid)[:, None]
    return jc.pad(logp, valid, float("nan")), jc.pad(old, valid, float("nan")), adv, valid


def test_other_mask_dtypes(sub, ref):
    """"0/1 in any float or integer dtype": bfloat16, float16, uint8 and int32 masks
    (judge.cases.OTHER_MASK_DTYPES) give the bool mask's s and loss, in logp's dtype. n_i is a
    per-row count here, so the rows are long enough that counting them in the mask's own dtype
    goes wrong: bfloat16 rounds 257 to 256, float16 rounds 2049 to 2048."""
    g = torch.Generator().manual_seed(2049)
    small, large = _count_case(g, 2, 300, [257, 300]), _count_case(g, 2, 2049, [2049, 683])
    plan = [(small, [257, 300], torch.bfloat16), (large, [2049, 683], torch.float16),
            (small, [257, 300], torch.uint8), (large, [2049, 683], torch.int32)]
    with batch(sub) as b:
        queued = [(case, counts, dt, b.sequence_ratio(case[0], case[1], case[3].to(dt)),
                   b.gspo_loss(leaf(case[0]), case[1], case[2], case[3].to(dt)))
                  for case, counts, dt in plan]
    distinct = {id(case): case for case, _, _ in plan}  # computed while the submission runs
    want = {key: (ref.sequence_ratio(case[0], case[1], case[3]), ref.gspo_loss(*case))
            for key, case in distinct.items()}
    for case, counts, dt, s, loss in queued:
        what = (f"with a {dt} 0/1 mask (float64 log-probs; {counts} valid tokens per response"
                + (f": counts {dt} cannot hold; count the tokens as integers or in logp's dtype)"
                   if dt.is_floating_point else ")"))
        shown = {"mask dtype": str(dt), "valid tokens per response": counts}
        want_s, want_loss = want[id(case)]
        s = check_tensor(s.value, what=f"sequence_ratio {what}", shape=(2,), dtype=torch.float64)
        assert_close(s, want_s, what=f"sequence_ratio {what}", inputs=shown)
        loss = check_tensor(loss.value, what=f"gspo_loss {what}", shape=(), dtype=torch.float64)
        assert_close(loss, want_loss, what=f"gspo_loss {what}", inputs=shown)
