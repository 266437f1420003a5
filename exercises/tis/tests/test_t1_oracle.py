"""T1: the TIS weights, loss and gradient against a scalar-loop oracle on fresh random inputs.

Which test covers which class (issue 17):
- test_seeded_shapes_regimes_mask_kinds_and_defaults: shapes drawn per seed (B = 1, L = 1, one
  batch of >= 16k tokens against the vectorised reference), every mask kind and fill, every
  default omitted in some calls, each PPO width alone in four (_cases.WIDTH_OMITTED: the other
  left out at its default 0.2), TIS bounds incl. [0, 1e12] and [1, 1], PPO widths 0 and >= 1,
  behaviour and PPO log-ratios +-25 and overflowing, e^-110/e^-800 probabilities, empty rows,
  float64 advantages with float32 logp, and in every other call non-contiguous views of the same
  values (column-major, sliced, strided: judge.cases.strided), which a .view(-1) cannot flatten.
- the other tests: random bounds, both aggregations, empty rows (sizes 1 x 1 ... 3 x 1 in the
  visible test, the larger ones in the hidden tests: in submit mode every size once per
  aggregation).
"""

import torch

from judge import cases as jc
from judge.testing import Feedback, assert_close, batch, check_tensor, leaf, sibling, visible

cases = sibling(__file__, "_cases")
F32, F64 = torch.float32, torch.float64

# Each check is split in three: queue the submission's calls in a batch (one round trip for all of
# them), compute the oracle's expectations while the submission runs, then check case by case.


# The hidden tests start where the visible small cases stop (both run in submit mode): each size
# of the sweep is tried once per aggregation, not the small ones twice.
SMALL = 4


def _queue_weights(b, ctx, salt, limit=None, start=0):
    g = ctx.generator(salt)
    queued = []
    for j, (case, (low, high)) in enumerate(cases.cases(g, limit=limit, start=start)):
        args = (case["old_logp"], case["rollout_logp"], case["mask"])
        # the bounds by position in every other case (the spec's order: clip_low, clip_high)
        bounds = dict(clip_low=low, clip_high=high)
        pending = b.tis_weights(*args, low, high) if j % 2 else b.tis_weights(*args, **bounds)
        queued.append((case, low, high, args, pending))
    return queued


def _expect_weights(oracle, queued):
    return [oracle.tis_weights(*args, clip_low=low, clip_high=high) for _, low, high, args, _ in queued]


def _check_weights(queued, expected):
    for (case, low, high, args, pending), want in zip(queued, expected):
        got = pending.value
        check_tensor(got, what="tis_weights", shape=tuple(want.shape), dtype=case["old_logp"].dtype)
        assert_close(got, want, what=f"tis_weights(clip_low={low:.4g}, clip_high={high:.4g})",
                     inputs={k: case[k] for k in ("old_logp", "rollout_logp", "mask")})


def _queue_loss(b, ctx, salt, per_token, limit=None, start=0):
    g = ctx.generator(salt)
    queued = []
    for j, (case, (low, high)) in enumerate(cases.cases(g, limit=limit, start=start)):
        eps_low, eps_high = 0.2, 0.28 if per_token else 0.2
        kw = dict(eps_low=eps_low, eps_high=eps_high, tis_low=low, tis_high=high,
                  per_token_loss=per_token)
        lp = leaf(case["logp"])
        args = (case["old_logp"], case["rollout_logp"], case["advantages"], case["mask"])
        # every argument by position in every other case, in the spec's order (a reordered or
        # keyword-only parameter, e.g. the TIS bounds before the PPO widths, fails there)
        pending = (b.tis_ppo_loss(lp, *args, *kw.values()) if j % 2 else b.tis_ppo_loss(lp, *args, **kw))
        queued.append((case, kw, lp, args, pending))
    return queued


def _expect_loss(oracle, queued):
    return [(oracle.tis_ppo_loss(case["logp"], *args, **kw),
             oracle.tis_ppo_loss_grad(case["logp"], *args, **kw)) for case, kw, _, args, _ in queued]


def _check_loss(queued, expected):
    descs = []   # every loss first, then one backward for all of them, then the gradients
    for (case, kw, lp, args, pending), (want, want_g) in zip(queued, expected):
        got = pending.value
        dtype = case["logp"].dtype
        check_tensor(got, what="tis_ppo_loss", shape=(), dtype=dtype)
        desc = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in kw.items())
        assert_close(got, want, what=f"tis_ppo_loss({desc})", inputs=case)
        if not got.requires_grad:
            raise Feedback("tis_ppo_loss returned a tensor with requires_grad=False: the loss "
                           "must stay connected to logp's graph")
        descs.append(desc)
    cases.backward_all([q[4].value for q in queued], descs)
    for (case, kw, lp, args, pending), (want, want_g), desc in zip(queued, expected, descs):
        assert_close(lp.grad if lp.grad is not None else torch.zeros_like(lp), want_g,
                     what=f"d tis_ppo_loss / d logp ({desc})", inputs=case)


@visible
def test_small_cases_match_oracle(sub, oracle, ctx):
    # sizes [1, 1], [1, 3], [2, 2], [3, 1]: weights, both aggregations, gradients
    with batch(sub) as b:
        weights = _queue_weights(b, ctx, 100, limit=SMALL)
        token_mean = _queue_loss(b, ctx, 104, per_token=True, limit=SMALL)
        seq_mean = _queue_loss(b, ctx, 105, per_token=False, limit=SMALL)
    expected = (_expect_weights(oracle, weights), _expect_loss(oracle, token_mean),
                _expect_loss(oracle, seq_mean))
    _check_weights(weights, expected[0])
    _check_loss(token_mean, expected[1])
    _check_loss(seq_mean, expected[2])


def test_weights_match_oracle(sub, oracle, ctx):
    with batch(sub) as b:
        queued = _queue_weights(b, ctx, 101, start=SMALL)
    _check_weights(queued, _expect_weights(oracle, queued))


def test_token_mean_loss_and_gradient_match_oracle(sub, oracle, ctx):
    with batch(sub) as b:
        queued = _queue_loss(b, ctx, 102, per_token=True, start=SMALL)
    _check_loss(queued, _expect_loss(oracle, queued))


def test_seq_mean_loss_and_gradient_match_oracle(sub, oracle, ctx):
    with batch(sub) as b:
        queued = _queue_loss(b, ctx, 103, per_token=False, start=SMALL)
    _check_loss(queued, _expect_loss(oracle, queued))


def test_seeded_shapes_regimes_mask_kinds_and_defaults(sub, oracle, ref, ctx):
    """Shapes drawn per seed (B = 1, L = 1, and one batch of >= 16k tokens compared with the
    vectorised reference), every mask kind, fill, default and value regime of
    ``_cases.regime_case``, non-contiguous inputs in every other call (``judge.cases.strided``); the
    weights and the loss are in old_logp's / logp's dtype."""
    g = ctx.generator(106)
    flip = ctx.seed % 2
    with batch(sub) as b:
        queued = []
        for k, (B, L) in enumerate(jc.shapes(g, n_drawn=5, max_side=9)):
            dtype = (F64, F32)[(k + flip) % 2]
            case, kw = cases.regime_case(g, B, L, dtype, k)
            if k % 2 == 1:  # non-contiguous: mixed layouts, or (k % 4 == 3) every [B, L] input column-major
                case = jc.strided(case, major=("logp", "rollout_logp"), column_major=(k % 4 == 3))
            wkw = {"clip_low": kw["tis_low"], "clip_high": kw["tis_high"]} if "tis_low" in kw else {}
            lp = leaf(case["logp"])
            args = (case["old_logp"], case["rollout_logp"], case["advantages"], case["mask"])
            queued.append((case, kw, wkw, lp, b.tis_weights(case["old_logp"], case["rollout_logp"], case["mask"], **wkw),
                           b.tis_ppo_loss(lp, *args, **kw)))
    checked = []   # every value first, then one backward for all the losses, then the gradients
    for case, kw, wkw, lp, pending_w, pending in queued:
        B, L = case["logp"].shape
        dtype = case["logp"].dtype
        args = (case["old_logp"], case["rollout_logp"], case["advantages"], case["mask"])
        if B * L >= jc.LARGE_TOKENS:
            want_w = ref.tis_weights(case["old_logp"], case["rollout_logp"], case["mask"], **wkw)
            rl = leaf(case["logp"])
            want = ref.tis_ppo_loss(rl, *args, **kw)
            want.backward()
            want_g = rl.grad
        else:
            want_w = oracle.tis_weights(case["old_logp"], case["rollout_logp"], case["mask"], **wkw)
            want = oracle.tis_ppo_loss(case["logp"], *args, **kw)
            want_g = oracle.tis_ppo_loss_grad(case["logp"], *args, **kw)
        desc = (f"[{B}, {L}] {dtype}, {case['mask'].dtype} mask, advantages {case['advantages'].dtype}"
                + ("" if case["old_logp"].is_contiguous() else ", non-contiguous inputs")
                + "".join(f", {k}={v:.4g}" if isinstance(v, float) else f", {k}={v}" for k, v in kw.items()))
        w = check_tensor(pending_w.value, what=f"tis_weights on {desc}", shape=(B, L), dtype=dtype)
        assert_close(w, want_w, what=f"tis_weights on {desc} (clamp(exp(old - rollout), low, high): an "
                     f"overflowing ratio gives high, an underflowing one low; no +-20 clamp of the "
                     f"log-ratio)", inputs=case)
        loss = check_tensor(pending.value, what=f"tis_ppo_loss on {desc} (the loss is in logp's dtype)",
                            shape=(), dtype=dtype)
        rtol, atol = jc.scaled_tolerance(dtype)
        big = float(want_g.abs().max()) if want_g.numel() else 0.0
        atol = max(atol, 16 * jc.machine_eps(dtype) * big)
        assert_close(loss, want, what=f"tis_ppo_loss on {desc}", inputs=case, rtol=rtol, atol=atol)
        checked.append((loss, f"tis_ppo_loss on {desc}", case, lp, want_g, desc))
    cases.backward_all([c[0] for c in checked], [c[1] for c in checked])
    for _, _, case, lp, want_g, desc in checked:
        if lp.grad is None:
            raise Feedback(f"tis_ppo_loss on {desc}: logp.grad is None after backward")
        assert_close(lp.grad, want_g, what=f"d tis_ppo_loss / d logp on {desc} (w times the PPO gradient: "
                     f"finite, 0 where the clipped term is chosen even when the ratio overflows)", inputs=case)
