"""T0: return types, shapes, dtypes, the ValueError guards and the empty mask.

Which test covers which class (issue 17; the regimes are in test_t2_regimes.py):
- test_weights_shape_and_dtype / test_loss_is_a_scalar_tensor: shapes, dtypes, a scalar () on
  logp's graph, every anchor/TIS configuration.
- test_unknown_anchor_raises ... test_bad_eps_raise / test_valid_eps_edges_accepted: every
  ValueError rule, under both anchors; the legal edges eps_low = 0 and eps_low > 1. (The same
  rules with an all-empty mask, under every configuration, and B = 1 with a 0-d advantage:
  test_t2_regimes.test_validation_with_empty_masks.)
- test_bad_shapes_raise: shape rules in both functions (1-D and 3-D loss inputs with advantages
  of matching length; a given rollout_logp of the wrong shape under anchor "old" without TIS).
- test_empty_mask: a bool (float64 inputs) and a 0/1 float32 (float32 inputs) all-empty mask
  with a NaN in the padding, every configuration (bool with float32, float masks of the other
  dtype, int64 masks, inf padding and B = 0: test_t2_regimes).
Input mutation is checked on every call by the judge (judge.readonly), in every branch.
"""

import torch

from judge.testing import Feedback, batch, check_tensor, describe, expect_raises, leaf, visible


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
        calls = [(bad, b.cispo_loss(logp, old, adv, mask, rollout_logp=rollout, anchor=bad))
                 for bad in ("behaviour", "Old", "current")]
    for bad, p in calls:
        expect_raises(ValueError, p.get, what=f"cispo_loss(anchor={bad!r})")


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


def test_valid_eps_edges_accepted(sub):
    """eps_low = 0 (lower bound 1) and eps_low > 1 (no lower bound) are legal."""
    logp, old, rollout, adv, mask = _batch()
    with batch(sub) as b:
        calls = []
        for eps_low, eps_high in ((0.0, 0.2), (1.5, 0.1)):
            calls.append((eps_low, eps_high, "cispo_weights",
                          b.cispo_weights(logp, old, mask, eps_low=eps_low, eps_high=eps_high)))
            calls.append((eps_low, eps_high, "cispo_loss",
                          b.cispo_loss(logp, old, adv, mask, eps_low=eps_low, eps_high=eps_high)))
    for eps_low, eps_high, what, p in calls:
        try:
            p.get()
        except ValueError as e:
            raise Feedback(f"{what}(eps_low={eps_low}, eps_high={eps_high}) raised ValueError: {e}; "
                           f"only eps_low < 0 or eps_high <= 0 are invalid") from None


def test_bad_shapes_raise(sub):
    logp, old, rollout, adv, mask = _batch()
    bad_loss = {
        "advantages of shape [B, 1]": dict(advantages=adv[:, None]),
        "advantages of shape [B + 1]": dict(advantages=torch.cat([adv, adv[:1]])),
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
