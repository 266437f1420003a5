"""T2: value regimes, encodings and validation paths the other tiers never generate (issue 17).

Which test covers which class of mistake:
- test_extreme_token_ratios: sampled-token log-ratios +-25 / +-60 / +-85 (float32), +-25 / +-100 /
  +-700 (float64) under every mode: no +-20 clamp of the log-ratio (verl / SkyRL style); ratios
  that overflow to inf: "mis" selects 0 (never inf * 0 = NaN), "tis" clamps.
- test_token_ratio_ties_on_neighbouring_floats: every float64 whose exp(logp - rollout_logp) is
  exactly a bound (and the next one outward), "tis" and "mis": a log-space comparison misjudges
  them; and a one-point "mis" band low == high (valid: it keeps the ratio equal to both).
- test_tiny_probabilities: head and token log-probs near e^-110 (float32) / e^-800 (float64):
  p / q is 0/0, form every ratio from a log difference; a head ratio p / q = 0 with q = 0.1 under
  "tis" with low = 0 (a ratio floored at 1e-8 gives the coefficient q * 1e-8, not 0).
- test_mixed_dtypes_and_mask_encodings: float64 advantages and bool / float32 / float64 / int64
  masks with float32 log-probs, every mode: the loss stays in logp's dtype.
- test_other_mask_dtypes: bfloat16 and float16 0/1 masks on three rows of 683 valid tokens
  (judge.cases.UNHELD_COUNTS), 2049 in all, which neither can hold: count tokens as integers.
- test_empty_masks_with_nan_padding: all-empty masks in every encoding with NaN / inf padding in
  every input (heads included), every mode; and B = 0 (each mode, each encoding, both dtypes): a
  graph-connected 0, zero gradients.
- test_validation_with_empty_masks: mode, bounds and shape rules with an all-empty mask, and
  B = 1 with a 0-d advantage; B = 0 with a 0-d advantage (an early return for the empty batch
  before the shape checks accepted it).
- test_policy_loss_defaults_omitted: mode, bounds and eps omitted where each default matters.
- test_mode_none_ignores_bounds: with mode="none" invalid bounds neither raise nor matter.
- test_large_batch_matches_reference: one batch with B * L >= 16384 (its sides, V and k drawn per
  seed; each position's prefix one of 1024 drawn) against the vectorised reference. ((B, L) drawn per seed, 1 x 1, 1 x L, B x 1, k = 1 ... V
  and every mask encoding against the oracle: test_t1_oracle.test_loss_random.)
"""

import math

import torch

from judge import cases as shared
from judge.testing import Feedback, assert_close, batch, check_connected_zero, check_count_loss, check_tensor, describe, expect_raises, leaf, sibling

cases = sibling(__file__, "_cases")
F32, F64 = torch.float32, torch.float64
NAN = float("nan")
MODES = (("none", 0.0, 2.0), ("tis", 0.0, 2.0), ("mis", 0.5, 2.0))


def _flat_heads(n_rows, dtype):
    """[n_rows, 1, 2] heads with p = q (correction 0), so the token weight alone shows."""
    h = torch.log(torch.tensor([0.3, 0.2], dtype=F64)).expand(n_rows, 1, 2).to(dtype)
    return h, h.clone()


def test_extreme_token_ratios(sub, oracle):
    with batch(sub) as b:
        calls = []
        for dtype in (F32, F64):
            mags = shared.EXTREME_LOG_RATIOS[dtype]
            lr = torch.tensor([[s * m] for m in mags for s in (1.0, -1.0)], dtype=F64)  # one token per row
            rollout = torch.full_like(lr, -1.0) - lr.clamp(min=0)
            logp = (rollout + lr).to(dtype)
            rollout = rollout.to(dtype)
            th, sh = _flat_heads(len(lr), dtype)
            adv = torch.tensor([1.5, -0.5] * len(mags), dtype=dtype)
            mask = torch.ones(len(lr), 1, dtype=torch.bool)
            top = 1e38 if dtype == F32 else 1e300  # a band wide enough to keep e^+-85 / e^+-700
            for mode, low, high in (("none", 0.0, 2.0), ("tis", 0.0, top), ("mis", 0.0, top)):
                x = leaf(logp)
                args = (logp, rollout, th, sh, adv, mask)
                calls.append((dtype, max(mags), mode, low, high, args, x,
                              b.sc_policy_loss(x, *args[1:], mode=mode, low=low, high=high)))
        for dtype in (F32, F64):
            mag = shared.OVERFLOW_LOG_RATIOS[dtype][0]  # exp overflows to inf / underflows to 0
            lr = torch.tensor([[mag], [-mag]], dtype=F64)
            rollout = (torch.full((2, 1), -1.0, dtype=F64) - lr.clamp(min=0)).to(dtype)
            logp = (rollout.to(F64) + lr).to(dtype)
            th, sh = _flat_heads(2, dtype)
            adv, mask = torch.tensor([1.5, -0.5], dtype=dtype), torch.ones(2, 1, dtype=torch.bool)
            for mode, low, high in MODES:
                x = leaf(logp)
                args = (logp, rollout, th, sh, adv, mask)
                calls.append((dtype, mag, mode, low, high, args, x,
                              b.sc_policy_loss(x, *args[1:], mode=mode, low=low, high=high)))
    for dtype, mag, mode, low, high, args, x, pending in calls:
        rtol, _ = shared.scaled_tolerance(dtype, mag)
        kw = dict(mode=mode, low=low, high=high)
        what = (f"sc_policy_loss(mode={mode!r}, low={low}, high={high:g}) with token log-ratios "
                f"logp - rollout_logp = {(args[0].double() - args[1].double()).flatten().tolist()} ({dtype}): "
                f"w_a = f(exp(logp - rollout_logp)) with no +-20 clamp of the log-ratio")
        shown = dict(zip(("logp", "rollout_logp", "train_head_logp", "sampler_head_logp", "advantages",
                          "mask"), args))
        loss = pending.value
        want, want_g, _ = oracle.sc_policy_loss_and_grads(*args, **kw)
        assert_close(loss, want, what=what, rtol=rtol, atol=1e-30, inputs=shown)
        loss.backward()
        assert_close(x.grad, want_g, what=f"d loss / d logp, {what}",
                     rtol=rtol, atol=1e-30, inputs=shown)


def _outward(x, up):
    return torch.nextafter(x, torch.tensor(math.inf if up else -math.inf, dtype=x.dtype))


def test_token_ratio_ties_on_neighbouring_floats(sub):
    # rollout_logp = 0, logp = x: the ratio exp(x) lands exactly on the bound for the floats from
    # judge.cases.onto_bound, and just outside it for the next float outward. The expected w_a is
    # computed here in the tensor's dtype (exp, then the comparison), as the spec says.
    with batch(sub) as b:
        calls = []
        for dtype in (F64,):  # float64: float64-internal styles are native there too
            # ("mis", 1.28, 1.28): low == high is valid, a one-point band that keeps a ratio of exactly 1.28
            for mode, low, high in (("mis", 0.5, 2.0), ("mis", 0.8, 1.2), ("tis", 0.8, 1.28), ("mis", 0.3, 1.28),
                                    ("mis", 1.28, 1.28)):
                lo_a, lo_b = shared.onto_bound(low, dtype)
                hi_a, hi_b = shared.onto_bound(high, dtype)
                xs = torch.stack([lo_a, lo_b, _outward(lo_a, False), hi_a, hi_b, _outward(hi_b, True)])
                logp = xs.reshape(6, 1)
                rollout = torch.zeros_like(logp)
                th, sh = _flat_heads(6, dtype)
                x = leaf(logp)
                calls.append((dtype, mode, low, high, logp, x,
                              b.sc_policy_loss(x, rollout, th, sh, torch.ones(6, dtype=dtype),
                                               torch.ones(6, 1, dtype=torch.bool), mode=mode, low=low, high=high)))
    for dtype, mode, low, high, logp, x, pending in calls:
        r = torch.exp(logp)
        if mode == "mis":
            w = torch.where((r >= low) & (r <= high), r, torch.zeros_like(r))
        else:
            w = r.clamp(low, high)
        pending.value.backward()
        what = (f"d sc_policy_loss / d logp = -A w_a / N (mode={mode!r}, band [{low}, {high}], A = 1) on the "
                f"floats whose ratio exp(logp - rollout_logp) is exactly a bound and the next ones outward "
                f"({dtype}): compare the ratio itself with the bounds in the input's dtype, not the "
                f"log-ratio with log(bound)")
        assert_close(x.grad, -w.to(F64) / 6, what=what,
                     inputs={"logp": logp, "rollout_logp": "0", "ratio": r})


def test_tiny_probabilities(sub, oracle):
    with batch(sub) as b:
        calls = []
        for dtype in (F32, F64):
            t = shared.TINY_LOGP[dtype]
            # head: two ordinary tokens and two whose probabilities underflow in both heads
            # (then p ordinary, q underflowing, so p / q overflows to inf; and p underflowing, q =
            # 0.1: p / q = 0, whose coefficient q f(0) - alpha' p is exactly 0 under "tis" with
            # low = 0, not the q * 1e-8 of a ratio floored with clamp(min=1e-8))
            th = torch.tensor([[[math.log(0.4), math.log(0.3), t, t + 0.5, math.log(0.05), t]]], dtype=F64)
            sh = torch.tensor([[[math.log(0.35), math.log(0.4), t - 0.2, t + 1.0, t, math.log(0.1)]]], dtype=F64)
            logp = torch.tensor([[t + 0.1]], dtype=F64)
            rollout = torch.tensor([[t]], dtype=F64)
            th, sh, logp, rollout = (v.to(dtype) for v in (th, sh, logp, rollout))
            for mode, low, high in MODES:
                xh, x = leaf(th[0, 0]), leaf(logp)
                xh2 = leaf(th)
                args = (logp, rollout, th, sh, torch.tensor([1.5], dtype=dtype), torch.ones(1, 1, dtype=torch.bool))
                calls.append((dtype, mode, low, high, th, sh, args, xh, x, xh2,
                              b.sc_correction(xh, sh[0, 0], mode=mode, low=low, high=high),
                              b.sc_policy_loss(x, args[1], xh2, *args[3:], mode=mode, low=low, high=high)))
    for dtype, mode, low, high, th, sh, args, xh, x, xh2, corr, loss in calls:
        kw = dict(mode=mode, low=low, high=high)
        shown = {"train_head_logp": th, "sampler_head_logp": sh, "logp": args[0], "rollout_logp": args[1]}
        what = (f"(mode={mode!r}) with head and token log-probs near {shared.TINY_LOGP[dtype]} ({dtype}): "
                f"form every ratio from a log difference, exp(log p - log q); p / q is 0/0 here")
        c = corr.value
        if not bool(torch.isfinite(c.detach()).all()):
            raise Feedback(f"sc_correction {what}; got {describe(c)}")
        want_c, want_coef = oracle.sc_correction_and_coefficients(th[0, 0], sh[0, 0], **kw)
        assert_close(c, want_c, what=f"sc_correction {what}", inputs=shown)
        c.backward()
        assert_close(xh.grad, want_coef,
                     what=f"d sc_correction / d train_head_logp {what}", inputs=shown)
        out = loss.value
        want, g_logp, g_head = oracle.sc_policy_loss_and_grads(*args, **kw)
        assert_close(out, want, what=f"sc_policy_loss {what}", inputs=shown)
        out.backward()
        assert_close(x.grad, g_logp, what=f"d sc_policy_loss / d logp {what}", inputs=shown)
        assert_close(xh2.grad, g_head, what=f"d sc_policy_loss / d train_head_logp {what}", inputs=shown)


def test_mixed_dtypes_and_mask_encodings(sub, oracle, ctx):
    g = ctx.generator(301)
    with batch(sub) as b:
        calls = []
        for i, kind in enumerate(shared.MASK_KINDS):
            t, kw = cases.loss_case(g, 3, 4, 6, 3, F32, 2 + 3 * i)
            t["mask"] = shared.as_mask(t["mask"] != 0, kind)
            t["advantages"] = t["advantages"].to(F64) + 0.1  # float64 advantages, float32 log-probs
            mode, low, high = MODES[i % len(MODES)]
            logp, head = leaf(t["logp"]), leaf(t["train_head_logp"])
            calls.append((kind, t, mode, low, high, logp, head,
                          b.sc_policy_loss(**{**t, "logp": logp, "train_head_logp": head},
                                           mode=mode, low=low, high=high)))
    for kind, t, mode, low, high, logp, head, pending in calls:
        kw = dict(mode=mode, low=low, high=high)
        what = (f"sc_policy_loss(mode={mode!r}) with float32 log-probs, float64 advantages and a {kind} mask: "
                f"the loss is in logp's dtype")
        loss = check_tensor(pending.value, what=what, shape=(), dtype=F32)
        want, g_logp, g_head = oracle.sc_policy_loss_and_grads(**t, **kw)
        assert_close(loss, want, what=what, inputs=t)
        loss.backward()
        assert_close(logp.grad, g_logp, what=f"d loss / d logp, {what}", inputs=t)
        assert_close(head.grad, g_head, what=f"d loss / d train_head_logp, {what}", inputs=t)


def test_other_mask_dtypes(sub, ref):
    # 0/1 masks in bfloat16 / float16 ("any float dtype"): three responses of 683 valid tokens
    # (then NaN padding), 2049 in all, which neither dtype can hold (bfloat16 not even a row's
    # 683), so a count taken in the mask's dtype (mask.sum(), or per row) is off. float64
    # log-probs, compared with the reference given the bool mask. (uint8 / int32 masks are read
    # like int64, which test_mixed_dtypes_and_mask_encodings covers.)
    g = torch.Generator().manual_seed(2049)
    counts = list(shared.UNHELD_COUNTS[torch.float16])
    B, L = len(counts), max(counts) + 5
    t, kw = cases.loss_case(g, B, L, 4, 2, F64, 1, pad=False, pool=32)              # mode "tis"
    valid = torch.arange(L).unsqueeze(0) < torch.tensor(counts).unsqueeze(1)
    t.update(logp=t["logp"].masked_fill(~valid, NAN), rollout_logp=t["rollout_logp"].masked_fill(~valid, NAN),
             mask=valid)
    with batch(sub) as b:
        queued = [(dt, b.sc_policy_loss(**{**t, "mask": valid.to(dt)}, **kw)) for dt in (torch.bfloat16, torch.float16)]
    want = ref.sc_policy_loss(**t, **kw)  # while the submission runs
    for dt, pending in queued:
        check_count_loss(pending.value, want, fn="sc_policy_loss", setting=f"mode={kw['mode']!r}", mask_dtype=dt,
                         counts=counts)


def test_empty_masks_with_nan_padding(sub):
    with batch(sub) as b:
        calls = []
        for i, kind in enumerate(shared.MASK_KINDS):
            dtype = shared.DTYPES[i % 2]
            for B in (3, 0):
                fill = (NAN, math.inf, -math.inf, 1e30)[(i + B) % 4]
                lp = torch.full((B, 4), fill, dtype=dtype)
                heads = torch.full((B, 4, 3), fill, dtype=dtype)
                mask = shared.as_mask(torch.zeros(B, 4, dtype=torch.bool), kind)
                for m, (mode, low, high) in enumerate(MODES):
                    if B == 0 and m != i % len(MODES):  # B = 0: one mode per encoding, every mode and dtype
                        continue
                    x, xh = leaf(lp), leaf(heads)
                    calls.append((dtype, kind, B, fill, mode, x, xh,
                                  b.sc_policy_loss(x, lp.clone(), xh, heads.clone(), torch.ones(B, dtype=dtype), mask,
                                                   mode=mode, low=low, high=high)))
    for dtype, kind, B, fill, mode, x, xh, pending in calls:
        what = (f"sc_policy_loss(mode={mode!r}) with an all-empty {kind} mask, every input {fill} (padding, "
                f"heads included), B = {B}, {dtype}")
        check_connected_zero(pending.value, what=what, dtype=dtype, leaves={"logp": x, "train_head_logp": xh},
                             why="padding is never read: x * 0 is NaN for NaN padding")


def test_validation_with_empty_masks(sub):
    lp = torch.full((2, 3), NAN, dtype=F64)
    heads = torch.full((2, 3, 2), NAN, dtype=F64)
    empty = torch.zeros(2, 3, dtype=torch.bool)
    adv = torch.zeros(2, dtype=F64)
    base = dict(logp=lp, rollout_logp=lp, train_head_logp=heads, sampler_head_logp=heads, advantages=adv, mask=empty)
    bad = [("mode='icepop'", {}, dict(mode="icepop"))]
    for mode in ("tis", "mis"):
        for low, high in ((-0.1, 2.0), (1.5, 1.2), (0.0, math.inf), (math.nan, 2.0)):
            bad.append((f"mode={mode!r}, low={low}, high={high}", {}, dict(mode=mode, low=low, high=high)))
    bad += [
        ("advantages of shape [B, 1]", dict(advantages=adv[:, None]), {}),
        ("heads of shape [B, L, 2] and [B, L, 1]", dict(sampler_head_logp=heads[..., :1]), {}),
        ("a [2, 2] rollout_logp", dict(rollout_logp=lp[:, :2]), {}),
        ("heads of shape [B, L] (no k axis)", dict(train_head_logp=lp, sampler_head_logp=lp), {}),
    ]
    with batch(sub) as b:
        calls = [(f"sc_policy_loss with {what} and an all-empty mask", b.sc_policy_loss(**{**base, **over}, **kw))
                 for what, over, kw in bad]
        one = torch.full((1, 3), -1.0, dtype=F64)
        h1 = torch.log(torch.tensor([0.3, 0.2], dtype=F64)).expand(1, 3, 2)
        for mode, low, high in MODES:
            calls.append((f"sc_policy_loss(mode={mode!r}) with B = 1 and a 0-d advantage (must be shape [1])",
                          b.sc_policy_loss(one, one, h1, h1.clone(), torch.tensor(1.0, dtype=F64),
                                           torch.ones(1, 3, dtype=torch.bool), mode=mode, low=low, high=high)))
        calls.append(("sc_policy_loss with B = 0 (logp [0, 3]) and a 0-d advantage (must be shape [0])",
                      b.sc_policy_loss(lp[:0], lp[:0], heads[:0], heads[:0], torch.tensor(1.0, dtype=F64), empty[:0])))
        calls.append(("sc_correction(mode='tis', low=2, high=1) on an empty leading shape",
                      b.sc_correction(heads[:0], heads[:0], mode="tis", low=2.0, high=1.0)))
    for what, pending in calls:
        expect_raises(ValueError, pending.get, what=what)


def test_large_batch_matches_reference(sub, ref, ctx):
    """One batch of B * L >= 16384 tokens against the reference, evaluated per prefix: every
    position's heads are one of the 1024 drawn prefixes' (cases.pooled_case), so the reference's
    sc_correction runs once on the [1024, k] pool (value and coefficients sg(q w - alpha' p) by
    its gradient) and each position takes its prefix's, with w_a, A, the mask and the token-mean
    N = max(1, sum m) computed here in float64: loss = sum m (-A w_a logp + A c) / N, d loss /
    d logp = -m A w_a / N, d loss / d train_head_logp = m A coef / N (the ratio exp(logp -
    rollout_logp) and f in the input's dtype, as the spec says)."""
    g = ctx.generator(303)
    B, L = shared.shapes(g)[-1]
    i = int(torch.randint(0, 6, (), generator=g))
    dtype = shared.DTYPES[i % 2]
    V = int(torch.randint(2, 6, (), generator=g))
    k = int(torch.randint(1, V + 1, (), generator=g))
    t, kw, (pick, th_pool, sh_pool) = cases.pooled_case(g, B, L, V, k, dtype, i, True, 1024)
    valid = t["mask"] != 0
    t["mask"] = shared.as_mask(valid, shared.MASK_KINDS[i % len(shared.MASK_KINDS)])
    logp, head = leaf(t["logp"]), leaf(t["train_head_logp"])
    with batch(sub) as b:
        loss = b.sc_policy_loss(**{**t, "logp": logp, "train_head_logp": head}, **kw)
    # while the submission runs: the reference's correction once per prefix (the garbage row of
    # the padded positions left out: they read row 1024, whose value and coefficients are 0 here)
    hp = th_pool[:1024].detach().requires_grad_()
    c_pool = ref.sc_correction(hp, sh_pool[:1024], **kw)
    c_pool.sum().backward()
    c_pool = torch.cat([c_pool.detach().to(F64), torch.zeros(1, dtype=F64)])
    coef_pool = torch.cat([hp.grad.to(F64), torch.zeros(1, k, dtype=F64)])
    zero = torch.zeros((), dtype=dtype)
    lp, lr = torch.where(valid, t["logp"], zero), torch.where(valid, t["rollout_logp"], zero)
    w_a = cases.is_rule(torch.exp(lp - lr), kw["mode"], kw["low"], kw["high"]).to(F64)
    A = t["advantages"].to(F64).unsqueeze(-1)
    n = max(1, int(valid.sum()))
    per_token = torch.where(valid, -A * w_a * lp.to(F64) + A * c_pool[pick], 0.0)
    want = per_token.sum() / n
    want_g_logp = torch.where(valid, -A * w_a / n, 0.0)
    rows = pick.reshape(-1, 1).expand(-1, k)
    want_g_head = coef_pool.gather(0, rows).view(B, L, k) * (A / n).unsqueeze(-1)  # padded rows: 0

    label = f"a large batch [{B}, {L}, {k}] ({dtype}, {t['mask'].dtype} mask)"
    loss = loss.value
    what = f"sc_policy_loss(mode={kw['mode']!r}, low={kw['low']}, high={kw['high']}) on {label}"
    tol = dict(rtol=2e-5, atol=1e-5) if dtype == F32 else {}  # float32 heads: see test_t1_oracle
    assert_close(loss, want, what=what, inputs=t, **tol)
    loss.backward()
    assert_close(logp.grad, want_g_logp, what=f"d loss / d logp, {what}", inputs=t, **tol)
    assert_close(head.grad, want_g_head, what=f"d loss / d train_head_logp, {what}", inputs=t, **tol)


def test_policy_loss_defaults_omitted(sub, oracle):
    # sc_policy_loss with mode, bounds and eps omitted: the token ratio 3 (clamped or zeroed by
    # "tis" / "mis") and a head holding all of the trainer's mass (P_H = 1 exactly: rho =
    # (1 - Q_H) / eps) make the defaults mode="none" and eps=1e-6 change the value.
    with batch(sub) as b:
        calls = []
        for dtype in (F64, F32):
            logp = torch.tensor([[math.log(0.6), math.log(0.3)]], dtype=F64)
            rollout = logp - torch.tensor([[math.log(3.0), 0.2]], dtype=F64)
            th = torch.log(torch.tensor([[[0.5, 0.5], [0.6, 0.4]]], dtype=F64))     # P_H = 1
            sh = torch.log(torch.tensor([[[0.5, 0.3], [0.3, 0.3]]], dtype=F64))     # Q_H = .8, .6
            args = tuple(v.to(dtype) for v in (logp, rollout, th, sh)) + (
                torch.tensor([1.5], dtype=dtype), torch.ones(1, 2, dtype=torch.bool))
            x, xh = leaf(args[0]), leaf(args[2])
            calls.append((dtype, args, x, xh, b.sc_policy_loss(x, args[1], xh, *args[3:])))
    for dtype, args, x, xh, pending in calls:
        shown = dict(zip(("logp", "rollout_logp", "train_head_logp", "sampler_head_logp", "advantages",
                          "mask"), args))
        what = f"sc_policy_loss with mode, low, high and eps omitted ({dtype}; defaults 'none', 0, 2, 1e-6)"
        loss = pending.value
        want, g_logp, g_head = oracle.sc_policy_loss_and_grads(*args)
        assert_close(loss, want, what=what, inputs=shown)
        loss.backward()
        assert_close(x.grad, g_logp, what=f"d loss / d logp, {what}", inputs=shown)
        assert_close(xh.grad, g_head, what=f"d loss / d train_head_logp, {what}", inputs=shown)


def test_mode_none_ignores_bounds(sub, ctx):
    # With mode="none" the bounds are unused (spec, Validation): invalid ones neither raise nor
    # change the value.
    t, _ = cases.loss_case(ctx.generator(304), 2, 3, 5, 2, F64, 0, pad=False)
    with batch(sub) as b:
        base = b.sc_policy_loss(**t, mode="none")
        odd = [((low, high), b.sc_policy_loss(**t, mode="none", low=low, high=high),
                b.sc_correction(t["train_head_logp"], t["sampler_head_logp"], mode="none", low=low, high=high))
               for low, high in ((-1.0, 2.0), (3.0, 1.0), (0.0, math.nan))]
        base_c = b.sc_correction(t["train_head_logp"], t["sampler_head_logp"])
    for (low, high), loss, corr in odd:
        try:
            got, got_c = loss.value, corr.value
        except ValueError as e:
            raise Feedback(f"mode='none' with low={low}, high={high} raised ValueError ({e}); the bounds are "
                           f"only validated for 'tis' and 'mis'") from None
        assert_close(got, base.value, what=f"sc_policy_loss(mode='none', low={low}, high={high}) versus the "
                                           f"defaults (the bounds are unused)", inputs=t)
        assert_close(got_c, base_c.value, what=f"sc_correction(mode='none', low={low}, high={high}) versus the "
                                              f"defaults", inputs=t)
