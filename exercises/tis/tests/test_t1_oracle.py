"""T1: the TIS weights, loss and gradient against a scalar-loop oracle on fresh random inputs."""

import torch

from judge.testing import Feedback, assert_close, check_tensor, leaf, sibling, visible

cases = sibling(__file__, "_cases")


def _weights(sub, oracle, ctx, salt, limit=None):
    g = ctx.generator(salt)
    for case, (low, high) in cases.cases(g, limit=limit):
        args = (case["old_logp"], case["rollout_logp"], case["mask"])
        got = sub.tis_weights(*args, clip_low=low, clip_high=high)
        want = oracle.tis_weights(*args, clip_low=low, clip_high=high)
        check_tensor(got, what="tis_weights", shape=tuple(want.shape), dtype=case["old_logp"].dtype)
        assert_close(got, want, what=f"tis_weights(clip_low={low:.4g}, clip_high={high:.4g})",
                     inputs={k: case[k] for k in ("old_logp", "rollout_logp", "mask")})


def _loss_and_grad(sub, oracle, ctx, salt, per_token, limit=None):
    g = ctx.generator(salt)
    for case, (low, high) in cases.cases(g, limit=limit):
        eps_low, eps_high = 0.2, 0.28 if per_token else 0.2
        kw = dict(eps_low=eps_low, eps_high=eps_high, tis_low=low, tis_high=high,
                  per_token_loss=per_token)
        lp = leaf(case["logp"])
        args = (case["old_logp"], case["rollout_logp"], case["advantages"], case["mask"])
        got = sub.tis_ppo_loss(lp, *args, **kw)
        dtype = case["logp"].dtype
        check_tensor(got, what="tis_ppo_loss", shape=(), dtype=dtype)
        want = oracle.tis_ppo_loss(case["logp"], *args, **kw)
        desc = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in kw.items())
        assert_close(got, want, what=f"tis_ppo_loss({desc})", inputs=case)
        if not got.requires_grad:
            raise Feedback("tis_ppo_loss returned a tensor with requires_grad=False: the loss "
                           "must stay connected to logp's graph")
        got.backward()
        want_g = oracle.tis_ppo_loss_grad(case["logp"], *args, **kw)
        assert_close(lp.grad if lp.grad is not None else torch.zeros_like(lp), want_g,
                     what=f"d tis_ppo_loss / d logp ({desc})", inputs=case)


@visible
def test_small_cases_match_oracle(sub, oracle, ctx):
    # sizes [1, 1], [1, 3], [2, 2], [3, 1]: weights, both aggregations, gradients
    _weights(sub, oracle, ctx, 100, limit=4)
    _loss_and_grad(sub, oracle, ctx, 104, per_token=True, limit=4)
    _loss_and_grad(sub, oracle, ctx, 105, per_token=False, limit=4)


def test_weights_match_oracle(sub, oracle, ctx):
    _weights(sub, oracle, ctx, 101)


def test_token_mean_loss_and_gradient_match_oracle(sub, oracle, ctx):
    _loss_and_grad(sub, oracle, ctx, 102, per_token=True)


def test_seq_mean_loss_and_gradient_match_oracle(sub, oracle, ctx):
    _loss_and_grad(sub, oracle, ctx, 103, per_token=False)
