"""T1: agreement with the scalar-loop oracle on fresh random inputs, smallest case first.

Which test covers which class (issue 17):
- test_seeded_shapes_regimes_mask_kinds_and_defaults: shapes drawn per seed (B = 1, L = 1, one
  batch of >= 16k tokens against the vectorised reference), every mask kind and fill, defaults
  omitted, widths 0 and >= 1, log-ratios +-25 (verl's clamp and dual clip differ there),
  overflowing ratios with A > 0 (gradient 0, not NaN), e^-110/e^-800 probabilities, empty rows,
  float64 advantages with float32 logp and float32 advantages with float64 logp (the loss and
  its precision stay logp's), and in every other call non-contiguous inputs
  (column-major logp and mask, a sliced old_logp, a strided advantages: judge.cases.strided), which a
  .view(-1) cannot flatten.
- test_group_advantages_matches_oracle / test_grpo_loss_matches_oracle: the default eps and
  several others, both aggregations, asymmetric clips (the larger shapes of the sweeps; the
  small ones are the visible tests', which also run in submit mode); every result's shape [N] and
  dtype (that of rewards) is checked in every flag combination, normalize_std=False included.
  grpo_loss's keyword calls leave out every parameter at its default (bands (0.2, 0.28) and
  (0.35, 0.2) among them), so each width is also passed alone, with and without per_token_loss:
  a solution that applies one width only when the other is given too is off there.
"""

from __future__ import annotations

import torch

from judge import cases as jc
from judge.testing import Feedback, assert_close, batch, check_tensor, leaf, sibling, visible

cases = sibling(__file__, "_cases")


# The hidden tests start where the visible small cases stop (both run in submit mode): each
# shape of the sweeps is tried once, not the small ones twice.
SMALL_ADV, SMALL_LOSS = 6, 3


def _check_advantages(sub, oracle, g, limit=None, start=0):
    with batch(sub) as b:
        calls = [(rewards, G, kwargs, b.group_advantages(rewards.clone(), G, **kwargs))
                 for rewards, G, kwargs in cases.advantage_cases(g, limit, start)]
    # the expectations, computed while the submission runs
    expected = [oracle.group_advantages(rewards, G, **kwargs) for rewards, G, kwargs, _ in calls]
    for (rewards, G, kwargs, pending), exp in zip(calls, expected):
        what = (f"group_advantages({str(rewards.dtype).replace('torch.', '')} rewards, group_size={G}"
                + "".join(f", {k}={v}" for k, v in kwargs.items()) + ")")
        # [N] in the dtype of rewards, in every branch (normalize_std=False too)
        out = check_tensor(pending.value, what=what, shape=tuple(rewards.shape), dtype=rewards.dtype)
        assert_close(out, exp, what=what, inputs={"rewards": rewards, "group_size": G, **kwargs})


def _check_loss(sub, oracle, g, limit=None, start=0):
    with batch(sub) as b:
        calls = []
        for logp, old, adv, mask, kwargs in cases.loss_cases(g, limit, start):
            lp = leaf(logp)
            pending = b.grpo_loss(lp, old.clone(), adv.clone(), mask.clone(), **kwargs)
            calls.append((logp, old, adv, mask, kwargs, lp, pending))
    # the expectations, computed while the submission runs, with the omitted parameters at the
    # spec's defaults
    expected = [(oracle.grpo_loss(logp, old, adv, mask, **{**cases.LOSS_DEFAULTS, **kwargs}),
                 oracle.grpo_loss_grad(logp, old, adv, mask, **{**cases.LOSS_DEFAULTS, **kwargs}))
                for logp, old, adv, mask, kwargs, _, _ in calls]
    checked = []   # every loss first (smallest case first), then one backward for all of them
    for (logp, old, adv, mask, kwargs, lp, pending), (exp, exp_grad) in zip(calls, expected):
        B, L = logp.shape
        what = (f"grpo_loss(B={B}, L={L}, {str(logp.dtype).replace('torch.', '')}, "
                + ", ".join(f"{k}={v}" for k, v in kwargs.items()) + ")")
        inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask, **kwargs}
        loss = pending.value
        assert_close(loss, exp, what=what, inputs=inputs)
        checked.append((loss, what, inputs, lp, exp_grad))
    cases.backward_all([c[0] for c in checked], [c[1] for c in checked])
    for _, what, inputs, lp, exp_grad in checked:
        assert_close(lp.grad, exp_grad, what=f"d {what} / d logp", inputs=inputs)


@visible
def test_group_advantages_small_cases(sub, oracle, ctx):
    _check_advantages(sub, oracle, ctx.generator(101), limit=SMALL_ADV)


def test_group_advantages_matches_oracle(sub, oracle, ctx):
    _check_advantages(sub, oracle, ctx.generator(102), start=SMALL_ADV)


@visible
def test_grpo_loss_small_cases(sub, oracle, ctx):
    _check_loss(sub, oracle, ctx.generator(103), limit=SMALL_LOSS)


def test_grpo_loss_matches_oracle(sub, oracle, ctx):
    _check_loss(sub, oracle, ctx.generator(104), start=SMALL_LOSS)


def test_seeded_shapes_regimes_mask_kinds_and_defaults(sub, oracle, ref, ctx):
    """Shapes drawn per seed (B = 1, L = 1, and one batch of >= 16k tokens compared with the
    vectorised reference), every mask kind, padding fill and value regime of
    ``_cases.regime_loss_case``, float64 advantages with float32 logp (the loss stays in
    logp's dtype), and non-contiguous views of the same values in every other call
    (``judge.cases.strided``)."""
    g = ctx.generator(105)
    flip = ctx.seed % 2
    with batch(sub) as b:
        calls = []
        for k, (B, L) in enumerate(jc.shapes(g, n_drawn=5, max_side=9)):
            # dtype by pairs of k, not by k's parity: regime_loss_case's per_token_loss follows
            # k % 2 and its mixed dtypes k % 3, so every seed meets float32 logp with float64
            # advantages (and the reverse) under both aggregations (k = 1, 5 or 7 with
            # per_token_loss=True; a float64 loss from the token-mean branch only is wrong)
            dtype = (torch.float32, torch.float64)[(k // 2 + flip) % 2]
            logp, old, adv, mask, kwargs = cases.regime_loss_case(g, B, L, dtype, k)
            if k % 2 == 1:
                v = jc.strided(dict(logp=logp, old=old, adv=adv, mask=mask), major=("logp", "mask"))
                logp, old, adv, mask = v["logp"], v["old"], v["adv"], v["mask"]
            lp = leaf(logp)
            calls.append((logp, old, adv, mask, kwargs, lp, b.grpo_loss(lp, old, adv, mask, **kwargs)))
    checked = []   # every loss first, then one backward for all of them
    for logp, old, adv, mask, kwargs, lp, pending in calls:
        B, L = logp.shape
        if B * L >= jc.LARGE_TOKENS:
            rl = leaf(logp)
            exp = ref.grpo_loss(rl, old, adv, mask, **kwargs)
            exp.backward()
            exp_grad = rl.grad
        else:
            exp = oracle.grpo_loss(logp, old, adv, mask, **kwargs)
            exp_grad = oracle.grpo_loss_grad(logp, old, adv, mask, **kwargs)
        what = (f"grpo_loss(B={B}, L={L}, {str(logp.dtype).replace('torch.', '')}, "
                + ("" if lp.is_contiguous() else "non-contiguous inputs, ")
                + f"{str(mask.dtype).replace('torch.', '')} mask, advantages "
                f"{str(adv.dtype).replace('torch.', '')}"
                + "".join(f", {k}={v}" for k, v in kwargs.items()) + ")")
        inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask, **kwargs}
        loss = check_tensor(pending.value, what=what + " (the loss is in logp's dtype)", shape=(),
                            dtype=logp.dtype)
        # terms as large as |A| e^25 may dominate a sum: scale the absolute tolerance with them
        rtol, atol = jc.scaled_tolerance(logp.dtype)
        big = float(exp_grad.abs().max()) if exp_grad.numel() else 0.0
        atol = max(atol, 16 * jc.machine_eps(logp.dtype) * big)
        assert_close(loss, exp, what=what, inputs=inputs, rtol=rtol, atol=atol)
        checked.append((loss, what, inputs, lp, exp_grad))
    cases.backward_all([c[0] for c in checked], [c[1] for c in checked])
    for _, what, inputs, lp, exp_grad in checked:
        if lp.grad is None:
            raise Feedback(f"{what}: logp.grad is None after backward")
        assert_close(lp.grad, exp_grad, what=f"d {what} / d logp (finite, exactly 0 where the clipped "
                     f"term is chosen, even when the ratio overflows)", inputs=inputs)
