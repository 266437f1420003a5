"""T0: shapes, dtypes, return types, ValueErrors and the empty mask.

Which test covers which class (issue 17; the regimes are in test_t2_regimes.py):
- test_correction_shapes_and_dtypes / test_loss_is_a_differentiable_scalar: leading shapes
  (), [3], [2, 1, 3] (a 4-D head: a sum over a hard-coded dim 2, or a squeeze() that drops the
  size-1 dim, is wrong), both dtypes, every mode.
- test_unknown_mode_raises / test_bad_bounds_raise / test_shape_mismatch_raises: every ValueError
  rule in both functions, "tis" and "mis", NaN and inf bounds; the legal edges low = 0, low = high;
  mode=None is not "none" (a `mode or "none"` default is wrong).
  (The same rules with an all-empty mask, and B = 1 with a 0-d advantage: test_t2_regimes.)
- test_empty_mask_is_a_graph_connected_zero: every mode (NaN/inf padding under an all-empty
  mask, every mask encoding and B = 0: test_t2_regimes).
Input mutation is checked on every call by the judge (judge.readonly), in every branch.
"""

import math

import torch

from judge.testing import Feedback, batch, check_tensor, describe, expect_raises, leaf, sibling, visible

cases = sibling(__file__, "_cases")


def _loss_inputs(ctx, salt, B=2, L=3, V=5, k=3, dtype=torch.float64):
    g = ctx.generator(salt)
    t, _ = cases.loss_case(g, B, L, V, k, dtype, 0, pad=False)
    return t


@visible
def test_correction_shapes_and_dtypes(sub, ctx):
    g = ctx.generator(1)
    runs = []
    with batch(sub) as b:
        for lead in [(), (3,), (2, 1, 3)]:
            for dtype in (torch.float32, torch.float64):
                th, sh, *_ = cases.heads(g, lead, 6, 3)
                th, sh = leaf(th.to(dtype)), sh.to(dtype)
                runs.append((lead, dtype, th, sh, b.sc_correction(th, sh)))
    for lead, dtype, th, sh, pending in runs:
        out = check_tensor(pending.value, what=f"sc_correction on heads of shape {tuple(th.shape)}",
                           shape=lead, dtype=dtype)
        if not out.requires_grad:
            raise Feedback("sc_correction must stay differentiable w.r.t. train_head_logp (the gradient "
                           "flows through the final log p_v), but its output has requires_grad=False")
        if not bool(torch.isfinite(out).all()):
            raise Feedback(f"sc_correction returned non-finite values {describe(out)} for ordinary heads "
                           f"train_head_logp = {describe(th)}, sampler_head_logp = {describe(sh)}")


@visible
def test_loss_is_a_differentiable_scalar(sub, ctx):
    runs = []
    with batch(sub) as b:
        for dtype in (torch.float32, torch.float64):
            t = _loss_inputs(ctx, 2, dtype=dtype)
            t["logp"] = leaf(t["logp"])
            t["train_head_logp"] = leaf(t["train_head_logp"])
            for mode in ("none", "tis", "mis"):
                runs.append((dtype, mode, b.sc_policy_loss(**t, mode=mode)))
    for dtype, mode, pending in runs:
        loss = check_tensor(pending.value, what=f"sc_policy_loss (mode={mode!r})",
                            shape=(), dtype=dtype)
        if not loss.requires_grad:
            raise Feedback(f"sc_policy_loss (mode={mode!r}) returned a loss with requires_grad=False: "
                           "it must stay connected to logp and train_head_logp")
        if not math.isfinite(float(loss.detach())):
            raise Feedback(f"sc_policy_loss (mode={mode!r}) returned {float(loss.detach())} on ordinary inputs")


@visible
def test_unknown_mode_raises(sub, ctx):
    t = _loss_inputs(ctx, 3)
    modes = ("icepop", "TIS", "", None)
    with batch(sub) as b:
        runs = [(b.sc_correction(t["train_head_logp"], t["sampler_head_logp"], mode=mode),
                 b.sc_policy_loss(**t, mode=mode)) for mode in modes]
    for mode, (correction, loss) in zip(modes, runs):
        expect_raises(ValueError, correction.get, what=f"sc_correction with mode={mode!r}")
        expect_raises(ValueError, loss.get, what=f"sc_policy_loss with mode={mode!r}")


def test_bad_bounds_raise(sub, ctx):
    t = _loss_inputs(ctx, 4)
    bad = [(-0.1, 2.0), (1.5, 1.2), (0.0, 0.0), (0.0, math.inf), (math.nan, 2.0), (0.0, math.nan), (-math.inf, 2.0)]
    valid = [(0.0, 2.0), (1.0, 1.0), (0.5, 0.5)]
    with batch(sub) as b:
        rejected = [(mode, low, high,
                     b.sc_correction(t["train_head_logp"], t["sampler_head_logp"], mode=mode, low=low, high=high),
                     b.sc_policy_loss(**t, mode=mode, low=low, high=high))
                    for mode in ("tis", "mis") for low, high in bad]
        accepted = [(mode, low, high,
                     b.sc_policy_loss(**t, mode=mode, low=low, high=high),
                     b.sc_correction(t["train_head_logp"], t["sampler_head_logp"], mode=mode, low=low, high=high))
                    for mode in ("tis", "mis") for low, high in valid]
    for mode, low, high, correction, loss in rejected:
        expect_raises(ValueError, correction.get,
                      what=f"sc_correction with mode={mode!r}, low={low}, high={high}")
        expect_raises(ValueError, loss.get,
                      what=f"sc_policy_loss with mode={mode!r}, low={low}, high={high}")
    # Valid edge bounds must not raise: low = 0, and low == high.
    for mode, low, high, loss, correction in accepted:
        try:
            loss.value
            correction.value
        except ValueError as e:
            raise Feedback(f"mode={mode!r}, low={low}, high={high} are valid bounds (0 <= low <= high, "
                           f"high > 0, finite) but a ValueError was raised: {e}") from None


def test_shape_mismatch_raises(sub, ctx):
    t = _loss_inputs(ctx, 5, B=2, L=3, k=3)
    bad = {
        "advantages of shape [B, 1]": dict(advantages=t["advantages"].unsqueeze(-1)),
        "advantages of shape [B + 1]": dict(advantages=torch.zeros(3, dtype=torch.float64)),
        "heads of shape [B, L] (no k axis)": dict(train_head_logp=t["logp"], sampler_head_logp=t["rollout_logp"]),
        "heads with different k": dict(sampler_head_logp=t["sampler_head_logp"][..., :2]),
        "heads of shape [B, L + 1, k]": dict(train_head_logp=torch.zeros(2, 4, 3, dtype=torch.float64),
                                             sampler_head_logp=torch.zeros(2, 4, 3, dtype=torch.float64)),
        "a mask of shape [B, L + 1]": dict(mask=torch.ones(2, 4, dtype=torch.bool)),
        "rollout_logp of shape [B, L - 1]": dict(rollout_logp=t["rollout_logp"][:, :2]),
        "1-D logp": dict(logp=t["logp"][0], rollout_logp=t["rollout_logp"][0], mask=t["mask"][0]),
    }
    with batch(sub) as b:
        first = b.sc_correction(t["train_head_logp"], t["sampler_head_logp"][..., :2])
        second = b.sc_correction(t["train_head_logp"], t["sampler_head_logp"][0])
        losses = []
        for what, change in bad.items():
            args = dict(t)
            args.update(change)
            losses.append((what, b.sc_policy_loss(**args)))
    expect_raises(ValueError, first.get, what="sc_correction with heads of shapes (2, 3, 3) and (2, 3, 2)")
    expect_raises(ValueError, second.get, what="sc_correction with heads of shapes (2, 3, 3) and (3, 3)")
    for what, loss in losses:
        expect_raises(ValueError, loss.get, what=f"sc_policy_loss with {what}")


@visible
def test_empty_mask_is_a_graph_connected_zero(sub, ctx):
    t = _loss_inputs(ctx, 6)
    t["mask"] = torch.zeros_like(t["mask"])
    runs = []
    with batch(sub) as b:
        for mode in ("none", "tis", "mis"):
            logp, head = leaf(t["logp"]), leaf(t["train_head_logp"])
            pending = b.sc_policy_loss(**{**t, "logp": logp, "train_head_logp": head}, mode=mode)
            runs.append((mode, logp, head, pending))
    for mode, logp, head, pending in runs:
        loss = check_tensor(pending.value,
                            what="sc_policy_loss with an all-zero mask", shape=(), dtype=torch.float64)
        if float(loss.detach()) != 0.0:
            raise Feedback(f"an all-zero mask must give a loss of exactly 0, got {describe(loss)} (mode={mode!r})")
        if not loss.requires_grad:
            raise Feedback("an all-zero mask must still give a graph-connected zero (requires_grad=True), "
                           "so that .backward() works in a training loop; got a detached tensor")
        loss.backward()
        for name, x in (("logp", logp), ("train_head_logp", head)):
            if x.grad is None or bool((x.grad != 0).any()):
                raise Feedback(f"with an all-zero mask, {name}.grad must be all zeros after backward(), "
                               f"got {describe(x.grad)}")
