"""T0: return types, shapes, dtypes, the ValueError guards and the empty mask.

Which test covers which class (issue 17; the regimes are in test_t2_regimes.py):
- test_weights_shape_and_dtype / test_loss_is_a_scalar_tensor: shapes, dtypes, a scalar () on
  logp's graph, every anchor/TIS configuration.
- test_unknown_anchor_raises ... test_bad_eps_raise / test_valid_eps_edges_accepted: every
  ValueError rule, under both anchors (an unknown anchor with and without rollout_logp); the
  legal edges eps_low = 0, eps_low > 1 and infinite widths, accepted and with the oracle's
  values. (The same
  rules with an all-empty mask, under every configuration, and B = 1 with a 0-d advantage:
  test_t2_regimes.test_validation_with_empty_masks.)
- test_bad_shapes_raise: shape rules in both functions (1-D and 3-D loss inputs with advantages
  of matching length; advantages [B, 1] and [1, B]; a given rollout_logp of the wrong shape
  under anchor "old" without TIS).
- test_other_mask_dtypes: bfloat16 / float16 / uint8 / int32 0/1 masks (judge.cases
  OTHER_MASK_DTYPES) on rows whose token counts bfloat16 / float16 cannot hold (557, 2049),
  every anchor/TIS configuration, against the reference: a count taken in the mask's dtype is off.
- test_empty_mask: a bool (float64 inputs) and a 0/1 float32 (float32 inputs) all-empty mask
  with a NaN in the padding, every configuration (bool with float32, float masks of the other
  dtype, int64 masks, inf padding and B = 0: test_t2_regimes); and a non-empty mask with every
  advantage 0 (a fresh-zero shortcut leaves logp.grad None).
Input mutation is checked on every call by the judge (judge.readonly), in every branch.
"""

import math

import torch

from judge import cases as shared
from judge.testing import Feedback, assert_close, batch, check_tensor, describe, expect_raises, leaf, visible


def _batch(B=2, L=3, dtype=torch.float64):
    logp = torch.tensor([[-1.0, -0.5, -2.0], [-0.7, -1.2, -0.1]], dtype=dtype)[:B, :L]
    old = logp - torch.tensor([[0.1, -0.2, 0.3], [0.0, 0.4, -0.1]], dtype=dtype)[:B, :L]
    rollout = old + torch.tensor([[0.2, 0.1, -0.3], [0.05, -0.2, 0.1]], dtype=dtype)[:B, :L]
    adv = torch.tensor([1.0, -0.5], dtype=dtype)[:B]
    mask = torch.ones(B, L, dtype=torch.bool)
    return logp, old, rollout, adv, mask


@visible
def test_weights_shape_and_dtype(sub, ctx):
    g = ctx.generator(1)
    with batch(sub) as b:
        calls = []
        for B, L in ((2, 3), (3, 3), (4, 1)):
            for dtype in (torch.float32, torch.float64):
                logp = -torch.rand(B, L, generator=g, dtype=torch.float64).to(dtype) - 0.1
                anchor = logp - 0.1
                mask = torch.ones(B, L, dtype=torch.bool)
                calls.append((B, L, dtype, b.cispo_weights(logp, anchor, mask, eps_low=0.2, eps_high=0.2)))
    for B, L, dtype, out in calls:
        check_tensor(out.value, what=f"cispo_weights on [{B}, {L}] {dtype}", shape=(B, L), dtype=dtype)


@visible
def test_loss_is_a_scalar_tensor(sub):
    with batch(sub) as b:
        calls = []
        for dtype in (torch.float32, torch.float64):
            logp, old, rollout, adv, mask = _batch(dtype=dtype)
            for kw in (dict(anchor="old"), dict(anchor="rollout", rollout_logp=rollout),
                       dict(anchor="old", rollout_logp=rollout, tis_enabled=True)):
                calls.append((dtype, kw, b.cispo_loss(leaf(logp), old, adv, mask, **kw)))
    for dtype, kw, p in calls:
        out = p.value
        label = f"cispo_loss(anchor={kw['anchor']!r}{', tis_enabled=True' if kw.get('tis_enabled') else ''})"
        check_tensor(out, what=label, shape=(), dtype=dtype)
        if not out.requires_grad:
            raise Feedback(f"{label} returned a tensor with requires_grad=False "
                           f"although logp requires grad: the loss must stay connected to logp "
                           f"(did you detach logp, or call .item()?)")


@visible
def test_unknown_anchor_raises(sub):
    logp, old, rollout, adv, mask = _batch()
    with batch(sub) as b:
        # every other call without rollout_logp: an anchor check made only when rollout_logp is
        # given (anchor "bogus" falling back to old) raises nowhere else
        calls = [(bad, r, b.cispo_loss(logp, old, adv, mask, rollout_logp=r, anchor=bad))
                 for bad, r in (("behaviour", rollout), ("Old", None), ("current", rollout),
                                (None, None))]  # None: not a default ("anchor or 'old'")
    for bad, r, p in calls:
        expect_raises(ValueError, p.get, what=f"cispo_loss(anchor={bad!r}, rollout_logp="
                                              f"{'[B, L]' if r is not None else None})")


@visible
def test_rollout_anchor_needs_rollout_logp(sub):
    logp, old, rollout, adv, mask = _batch()
    expect_raises(ValueError, sub.cispo_loss, logp, old, adv, mask, rollout_logp=None,
                  anchor="rollout", what='cispo_loss(anchor="rollout", rollout_logp=None)')


@visible
def test_rollout_anchor_rejects_tis(sub):
    logp, old, rollout, adv, mask = _batch()
    expect_raises(ValueError, sub.cispo_loss, logp, old, adv, mask, rollout_logp=rollout,
                  anchor="rollout", tis_enabled=True,
                  what='cispo_loss(anchor="rollout", tis_enabled=True) (the rollout-anchored ratio '
                       'already is the off-policy correction: TIS on top would double-count it)')


def test_tis_needs_rollout_logp(sub):
    logp, old, rollout, adv, mask = _batch()
    expect_raises(ValueError, sub.cispo_loss, logp, old, adv, mask, rollout_logp=None,
                  anchor="old", tis_enabled=True,
                  what='cispo_loss(anchor="old", tis_enabled=True, rollout_logp=None)')


def test_bad_eps_raise(sub):
    logp, old, rollout, adv, mask = _batch()
    with batch(sub) as b:
        calls = []
        for eps_low, eps_high in ((-0.1, 0.2), (0.2, 0.0), (0.2, -0.5), (-1.0, 4.0)):
            calls.append((b.cispo_weights(logp, old, mask, eps_low=eps_low, eps_high=eps_high),
                          f"cispo_weights(eps_low={eps_low}, eps_high={eps_high})"))
            for anchor in ("old", "rollout"):
                calls.append((b.cispo_loss(logp, old, adv, mask, rollout_logp=rollout, anchor=anchor,
                                           eps_low=eps_low, eps_high=eps_high),
                              f"cispo_loss(anchor={anchor!r}, eps_low={eps_low}, eps_high={eps_high})"))
    for p, what in calls:
        expect_raises(ValueError, p.get, what=what)


def test_valid_eps_edges_accepted(sub, oracle):
    """eps_low = 0 (lower bound 1), eps_low > 1 (no lower bound) and infinite widths (no bound
    on that side: only eps_low < 0 or eps_high <= 0 raise, so a finiteness check is a mistake)
    are legal, and their values are the oracle's (the ratios 0.82 and 0.90 lie below 1 and
    below 1 - eps_high = 0.9: a lower bound taken from anything but 1 - eps_low shows)."""
    logp, old, rollout, adv, mask = _batch()
    with batch(sub) as b:
        calls = []
        for eps_low, eps_high in ((0.0, 0.2), (1.5, 0.1), (0.2, math.inf)):
            calls.append((eps_low, eps_high, "cispo_weights",
                          b.cispo_weights(logp, old, mask, eps_low=eps_low, eps_high=eps_high)))
            calls.append((eps_low, eps_high, "cispo_loss",
                          b.cispo_loss(logp, old, adv, mask, eps_low=eps_low, eps_high=eps_high)))
        calls.append((math.inf, 4.0, "cispo_loss", b.cispo_loss(logp, old, adv, mask, eps_low=math.inf)))
    for eps_low, eps_high, what, p in calls:
        try:
            p.get()
        except ValueError as e:
            # the exception's text last, after "it raised": the judge's diagnosis compares this
            # message with a known mistake's in-process one (judge.diagnose.essence drops what
            # the sandbox adds after "<name> raised T: ", the location and the trace block)
            raise Feedback(f"{what}(eps_low={eps_low}, eps_high={eps_high}): only eps_low < 0 or "
                           f"eps_high <= 0 are invalid, but it raised ValueError: {e}") from None
    for eps_low, eps_high, what, p in calls:
        if what == "cispo_weights":
            want = oracle.cispo_weights(logp, old, mask, eps_low=eps_low, eps_high=eps_high)
        else:
            want = oracle.cispo_loss(logp, old, adv, mask, eps_low=eps_low, eps_high=eps_high)
        assert_close(p.value, want, what=f"{what}(eps_low={eps_low}, eps_high={eps_high})",
                     inputs={"logp": logp, "old_logp": old})


def test_bad_shapes_raise(sub):
    logp, old, rollout, adv, mask = _batch()
    bad_loss = {
        "advantages of shape [B, 1]": dict(advantages=adv[:, None]),
        "advantages of shape [B + 1]": dict(advantages=torch.cat([adv, adv[:1]])),
        # [1, B]: its last dimension is B, so a check of shape[-1] (then a flatten) passes it
        "advantages of shape [1, B]": dict(advantages=adv[None]),
        "a mask of shape [B, L - 1]": dict(mask=mask[:, :2]),
        "old_logp of shape [B, L + 1]": dict(old_logp=torch.cat([old, old[:, :1]], dim=1)),
        "a 1-D logp": dict(logp=logp[0], old_logp=old[0], mask=mask[0]),
        # non-2-D inputs whose shapes agree, with advantages of length shape[0] (so only the
        # 2-D rule can fire): a loss that compares shapes and inlines the weights broadcasts them
        "1-D [L] inputs and advantages [L]": dict(logp=logp[0], old_logp=old[0], mask=mask[0],
                                                  advantages=torch.zeros(3, dtype=logp.dtype)),
        "3-D [1, B, L] inputs and advantages [1]": dict(logp=logp[None], old_logp=old[None],
                                                        mask=mask[None], advantages=adv[:1]),
    }
    with batch(sub) as b:
        calls = []
        for label, over in bad_loss.items():
            args = dict(logp=logp, old_logp=old, advantages=adv, mask=mask)
            args.update(over)
            calls.append((b.cispo_loss(args["logp"], args["old_logp"], args["advantages"], args["mask"]),
                          f"cispo_loss with {label} (logp is {describe(args['logp'])})"))
        calls.append((b.cispo_loss(logp, old, adv, mask, rollout_logp=rollout[:1], anchor="rollout"),
                      'cispo_loss(anchor="rollout") with rollout_logp of shape [1, L]'))
        # Shapes: "(when given) rollout_logp" is [B, L] too, also where its values are ignored
        calls.append((b.cispo_loss(logp, old, adv, mask, rollout_logp=rollout[:, :2]),
                      'cispo_loss(anchor="old", tis_enabled=False) with rollout_logp of shape '
                      '[B, L - 1] (ignored for its values, but a given rollout_logp must be [B, L])'))
        for label, (lp, an, m) in {
            "anchor_logp of shape [B, L - 1]": (logp, old[:, :2], mask),
            "a mask of shape [B - 1, L]": (logp, old, mask[:1]),
            "1-D inputs": (logp[0], old[0], mask[0]),
        }.items():
            calls.append((b.cispo_weights(lp, an, m), f"cispo_weights with {label}"))
    for p, what in calls:
        expect_raises(ValueError, p.get, what=what)


@visible
def test_empty_mask(sub):
    with batch(sub) as b:
        calls = []  # (dtype, weights, [(kw, logp leaf, loss)]) in the order they are checked
        # a bool mask with float64 inputs, a 0/1 float mask with float32 ones (the other
        # encodings, int64 masks and B = 0: test_t2_regimes.test_empty_masks_with_nan_padding)
        for dtype, mask_dtype in ((torch.float64, torch.bool), (torch.float32, torch.float32)):
            logp, old, rollout, adv, _ = _batch(dtype=dtype)
            logp = logp.clone()
            logp[1, 2] = float("nan")  # padding may hold anything
            for mask in (torch.zeros(2, 3, dtype=mask_dtype),):
                w = b.cispo_weights(logp, old, mask)
                losses = []
                for kw in (dict(anchor="old"), dict(anchor="rollout", rollout_logp=rollout),
                           dict(anchor="old", rollout_logp=rollout, tis_enabled=True)):
                    x = leaf(logp)
                    losses.append((kw, x, b.cispo_loss(x, old, adv, mask, **kw)))
                calls.append((dtype, w, losses))
        # a non-empty mask whose advantages are all 0 (a GRPO group with equal rewards), NaN
        # padding: still a zero on logp's graph with zero gradients, not a fresh
        # torch.zeros((), requires_grad=True) shortcut (logp.grad stays None)
        logp, old, rollout, adv, mask = _batch(dtype=torch.float32)
        mask[1, 2] = False
        x0 = leaf(torch.where(mask.bool(), logp, torch.tensor(float("nan"))))
        zero_adv = b.cispo_loss(x0, old, torch.zeros_like(adv), mask, rollout_logp=rollout, anchor="rollout")
    loss = zero_adv.value
    what = "cispo_loss(anchor='rollout') with every advantage 0 (non-empty mask, NaN padding)"
    check_tensor(loss, what=what, shape=(), dtype=torch.float32)
    if float(loss.detach()) != 0.0 or not loss.requires_grad:
        raise Feedback(f"{what} must be a zero connected to logp's graph, got {describe(loss)}")
    loss.backward()
    if x0.grad is None or not bool((x0.grad == 0).all()):
        raise Feedback(f"{what}: logp.grad must be all zeros (A = 0 gives gradient 0), got "
                       f"{describe(x0.grad) if x0.grad is not None else None}")
    for dtype, pw, losses in calls:
        w = pw.value
        check_tensor(w, what="cispo_weights with an empty mask", shape=(2, 3), dtype=dtype)
        if bool((w != 0).any()):
            raise Feedback(f"cispo_weights with an all-zero mask must be all 0 (weights are 0 at "
                           f"padding), got {describe(w)}")
        for kw, x, p in losses:
            loss = p.value
            what = f"cispo_loss(anchor={kw['anchor']!r}{', tis' if kw.get('tis_enabled') else ''}) with an empty mask"
            check_tensor(loss, what=what, shape=(), dtype=dtype)
            if not loss.requires_grad:
                raise Feedback(f"{what} must return a zero connected to logp's graph "
                               f"(requires_grad=True), got {describe(loss)} with requires_grad=False "
                               f"(e.g. torch.tensor(0.) is detached; sum the masked per-token losses "
                               f"and divide by max(1, N))")
            if float(loss.detach()) != 0.0:
                raise Feedback(f"{what} must be exactly 0, got {describe(loss)}")
            loss.backward()
            if x.grad is None or not bool((x.grad == 0).all()):
                raise Feedback(f"{what}: logp.grad must be all zeros, got "
                               f"{describe(x.grad) if x.grad is not None else None}")


# "0/1 in any float or integer dtype": token counts a bfloat16 or float16 mask cannot hold, so a
# count taken in the mask's own dtype (mask.sum()) is off. Small case [2, 300]: 257 and 300 valid
# tokens (bfloat16 rounds the batch's 557 to 556) with bfloat16 and int32 masks; large case
# [3, 683], all 2049 valid (float16 rounds 2049 to 2048) with float16 and uint8 masks. Each
# anchor/TIS configuration meets a 16-bit float mask.
def _rows(case: dict) -> tuple:
    return tuple(case[k] for k in ("logp", "old_logp", "advantages", "valid", "rollout_logp"))


def test_other_mask_dtypes(sub, ref):
    g = torch.Generator().manual_seed(2049)
    small_counts, large_counts = list(shared.UNHELD_COUNTS[torch.bfloat16]), list(shared.UNHELD_COUNTS[torch.float16])
    small = _rows(shared.count_case(g, small_counts))
    large = _rows(shared.count_case(g, large_counts))
    old_, roll_, tis_ = dict(anchor="old"), dict(anchor="rollout"), dict(anchor="old", tis_enabled=True)
    plan = [(small, small_counts, torch.bfloat16, old_), (small, small_counts, torch.int32, old_),
            (small, small_counts, torch.bfloat16, tis_), (large, large_counts, torch.float16, roll_),
            (large, large_counts, torch.uint8, roll_)]
    assert {dt for _, _, dt, _ in plan} == set(shared.OTHER_MASK_DTYPES)
    with batch(sub) as b:
        queued = [(case, counts, dt, kw, b.cispo_loss(leaf(case[0]), case[1], case[2], case[3].to(dt),
                                                      rollout_logp=case[4], eps_low=0.2, eps_high=0.28, **kw))
                  for case, counts, dt, kw in plan]
    distinct = {(id(case), tuple(kw.items())): (case, kw) for case, _, _, kw in plan}
    want = {key: ref.cispo_loss(*case, eps_low=0.2, eps_high=0.28, **kw)  # while the submission runs
            for key, (case, kw) in distinct.items()}
    for case, counts, dt, kw, pending in queued:
        what = (f"cispo_loss({', '.join(f'{k}={v!r}' for k, v in kw.items())}) with a {dt} 0/1 mask "
                f"(float64 log-probs; {counts} valid tokens per response, {sum(counts)} in all"
                + (f": N = {sum(counts)}, which {dt} cannot hold; count the tokens as integers or in "
                   f"logp's dtype)" if dt.is_floating_point else ")"))
        loss = check_tensor(pending.value, what=what, shape=(), dtype=torch.float64)
        assert_close(loss, want[id(case), tuple(kw.items())], what=what,
                     inputs={"mask dtype": str(dt), "valid tokens per response": counts})
