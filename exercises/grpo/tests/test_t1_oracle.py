"""T1: agreement with the scalar-loop oracle on fresh random inputs, smallest case first."""

from __future__ import annotations

from judge.testing import assert_close, batch, leaf, sibling, visible

cases = sibling(__file__, "_cases")


def _check_advantages(sub, oracle, g, limit=None):
    with batch(sub) as b:
        calls = [(rewards, G, kwargs, b.group_advantages(rewards.clone(), G, **kwargs))
                 for rewards, G, kwargs in cases.advantage_cases(g, limit)]
    # the expectations, computed while the submission runs
    expected = [oracle.group_advantages(rewards, G, **kwargs) for rewards, G, kwargs, _ in calls]
    for (rewards, G, kwargs, pending), exp in zip(calls, expected):
        assert_close(pending.value, exp, what=f"group_advantages(rewards, group_size={G}"
                     + "".join(f", {k}={v}" for k, v in kwargs.items()) + ")",
                     inputs={"rewards": rewards, "group_size": G, **kwargs})


def _check_loss(sub, oracle, g, limit=None):
    with batch(sub) as b:
        calls = []
        for logp, old, adv, mask, kwargs in cases.loss_cases(g, limit):
            lp = leaf(logp)
            pending = b.grpo_loss(lp, old.clone(), adv.clone(), mask.clone(), **kwargs)
            calls.append((logp, old, adv, mask, kwargs, lp, pending))
    # the expectations, computed while the submission runs
    expected = [(oracle.grpo_loss(logp, old, adv, mask, **kwargs),
                 oracle.grpo_loss_grad(logp, old, adv, mask, **kwargs))
                for logp, old, adv, mask, kwargs, _, _ in calls]
    for (logp, old, adv, mask, kwargs, lp, pending), (exp, exp_grad) in zip(calls, expected):
        B, L = logp.shape
        what = (f"grpo_loss(B={B}, L={L}, {str(logp.dtype).replace('torch.', '')}, "
                + ", ".join(f"{k}={v}" for k, v in kwargs.items()) + ")")
        inputs = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask, **kwargs}
        loss = pending.value
        assert_close(loss, exp, what=what, inputs=inputs)
        loss.backward()
        assert_close(lp.grad, exp_grad, what=f"d {what} / d logp", inputs=inputs)


@visible
def test_group_advantages_small_cases(sub, oracle, ctx):
    _check_advantages(sub, oracle, ctx.generator(101), limit=6)


def test_group_advantages_matches_oracle(sub, oracle, ctx):
    _check_advantages(sub, oracle, ctx.generator(102))


@visible
def test_grpo_loss_small_cases(sub, oracle, ctx):
    _check_loss(sub, oracle, ctx.generator(103), limit=3)


def test_grpo_loss_matches_oracle(sub, oracle, ctx):
    _check_loss(sub, oracle, ctx.generator(104))
