"""The judge's fast path for grpo's T3 toy (the learner's experiment.py is the plain run).

T3 checks the submission's bandit along the reference's: ``run(experiment, sub, out_dir,
guide=trajectory(experiment, ref))`` makes the run's 180 calls as three (every group, every
epoch at once) or four (the first step whose advantages are all 0 also alone), in one batch, and checks each step against the reference's next logits; a run
that strays is trained step by step (``experiment._train``), so the metrics are always those of
the plain run. tests/test_experiments.py checks that they are.
"""

from __future__ import annotations

import torch

from judge.testing import batch, check_tensor

STEP_ATOL = 1e-12  # a guided epoch lands this close to the reference's next logits, or the run is
                   # trained step by step


def run(experiment, impl, out_dir=None, seed: int = 0, guide: torch.Tensor | None = None) -> dict:
    """``experiment.run(impl, out_dir, seed)``, checked along ``guide`` (the reference's
    ``trajectory``) in one batch of calls, and trained step by step only if it strays."""
    def train(impl, seed):
        hist = train_guided(experiment, impl, seed, guide) if guide is not None else None
        return hist if hist is not None else experiment._train(impl, seed)

    return experiment.run(impl, out_dir, seed, train=train)


def trajectory(experiment, impl, seed: int = 0) -> torch.Tensor:
    """[ITERATIONS * EPOCHS + 1, 2, 4] float64: the logits of ``impl``'s run before every
    epoch, then the final ones; the reference's is the ``guide`` of ``run``."""
    trace: list = []
    experiment._train(impl, seed, trace)
    return torch.stack(trace)


class _Draws:
    """Stands in for a batch in ``experiment._draw_group``: records each group_advantages call's
    arguments instead of making it (the guided run makes one call per variant for all groups)."""

    def __init__(self):
        self.calls: list[tuple] = []

    def group_advantages(self, rewards, group_size, **kwargs):
        self.calls.append((rewards, group_size, kwargs))
        return len(self.calls) - 1


def train_guided(experiment, impl, seed: int, guide: torch.Tensor) -> list[dict] | None:
    """The run, checked step by step along the reference's trajectory ``guide``; None when a
    step strays from it.

    Along the reference's trajectory every epoch's logits are known in advance, so the whole run
    is three calls in one batch, not one round trip to the sandbox per step: group_advantages on
    every iteration's group at once, one call per variant (N = 30 x 8: the groups are contiguous
    slices and each is normalised alone, as in the step-by-step run's one call per group), and
    one grpo_loss on every epoch's responses at once (120 epochs x 16 one-token responses: each
    response's gradient is its own, divided by 1920 instead of 16, so it is multiplied back by
    120). Each epoch's step theta_k - LR * grad(theta_k) is then checked against the reference's
    theta_{k+1} (``STEP_ATOL``). When every step lands there, the run ``experiment._train`` would
    make is this one: it starts at the same logits, and each of its steps lands where the
    reference's does, to within rounding, for any implementation whose answer on many groups
    (responses) is its answers on each alone, as the spec defines them; one whose answers differ
    there strays and is trained step by step, and one that is right on many groups but wrong on
    one alone fails T1, whose cases have single groups and small batches. The bandit damps a
    stray (measured: a step pushed 3e-8 off is 1.8e-8 off at the end), so 120 steps stray at
    most ~1.2e-10 in all; T3 compares probabilities at 1e-5, and in the reference's run (seed 0)
    no discrete decision is closer than 8e-5 to flipping (a uniform to a step of the CDF, a ratio
    to a clip bound, P(arm 2) to 0.9). The curves are built as ``_train`` builds them, from the
    submission's advantages, clip fractions and gradients. Anything else (a stray step, a shape,
    a raise, a non-finite gradient, an argument written in place: the step-by-step run's later
    calls would see it) returns None, and ``run`` trains step by step instead
    (``experiment._train``), which also says what went wrong.
    """
    x = experiment
    n_pol, G, n_arms = len(x.VARIANTS), x.GROUP_SIZE, len(x.ARM_REWARDS)
    ITERATIONS, EPOCHS = x.ITERATIONS, x.EPOCHS
    K = ITERATIONS * EPOCHS
    if tuple(guide.shape) != (K + 1, n_pol, n_arms) or guide.dtype != torch.float64:
        return None
    uniforms, rows, _ = x._setup(seed)
    probs_seen, rewards_seen, arms_seen = [], [], []
    draws = _Draws()
    for it in range(ITERATIONS):                                   # every iteration's groups
        probs = torch.softmax(guide[it * EPOCHS], -1)              # [2, 4]
        arms, rewards, _ = x._draw_group(draws, probs, uniforms[it])
        probs_seen.append(probs)
        rewards_seen.append(rewards)
        arms_seen.append(arms.reshape(-1))                         # [2G]
    # every epoch's logp [K, 2G]: log pi(arm) at the logits the epoch starts from; old_logp is
    # the first epoch's of its iteration
    arms_k = torch.stack(arms_seen).repeat_interleave(EPOCHS, 0)   # [K, 2G]
    lsm_k = torch.log_softmax(guide[:K], -1)                       # [K, 2, 4]
    logp_k = lsm_k[torch.arange(K)[:, None], rows, arms_k]         # [K, 2G]
    old_k = logp_k[::EPOCHS].repeat_interleave(EPOCHS, 0)          # [K, 2G]
    try:
        with batch(impl) as b:
            pending_adv = []
            for k in range(n_pol):                                 # one call per variant
                _, group, kw = draws.calls[k]
                rewards_k = torch.cat([draws.calls[it * n_pol + k][0] for it in range(ITERATIONS)])
                pending_adv.append(b.group_advantages(rewards_k, group, **kw))
            advs = [check_tensor(p.value, what="group_advantages", shape=(ITERATIONS * G,))
                    .detach().to(torch.float64).reshape(ITERATIONS, G) for p in pending_adv]
            adv_it = torch.cat(advs, dim=1)                        # [T, 2G], as _train's cat
            adv_k = adv_it.repeat_interleave(EPOCHS, 0)            # [K, 2G]
            leaf = logp_k.reshape(K * n_pol * G, 1).clone().requires_grad_(True)
            sent = [old_k.reshape(-1, 1).clone(), adv_k.reshape(-1).clone(),
                    torch.ones(K * n_pol * G, 1, dtype=torch.bool)]
            versions = [t._version for t in sent]
            pending = b.grpo_loss(leaf, *sent, clip_low=x.CLIP_LOW, clip_high=x.CLIP_HIGH)
            # A step whose advantages are all 0 (every reward of both groups equal) is special
            # case enough to be answered apart: the first such step also goes alone, as _train
            # sends it, and its gradient must be the stacked call's for that step.
            zero_steps = (adv_k == 0).all(dim=1).nonzero().flatten()
            alone = None
            if len(zero_steps):
                kz = int(zero_steps[0])
                leaf_z = logp_k[kz].unsqueeze(-1).clone().requires_grad_(True)        # [2G, 1]
                alone = (kz, leaf_z, b.grpo_loss(leaf_z, old_k[kz].unsqueeze(-1), adv_k[kz].clone(),
                                                 torch.ones(n_pol * G, 1, dtype=torch.bool),
                                                 clip_low=x.CLIP_LOW, clip_high=x.CLIP_HIGH))
        loss = check_tensor(pending.value, what="grpo_loss", shape=())
        if any(t._version != v for t, v in zip(sent, versions)):   # it wrote into an input
            return None
        if not loss.requires_grad:                                 # _train's backward() would raise
            return None
        if alone is not None:
            kz, leaf_z, pending_z = alone
            loss_z = check_tensor(pending_z.value, what="grpo_loss", shape=())
            if not loss_z.requires_grad:                           # _train's backward() would raise
                return None
            loss_z.backward()
            grad_z = (torch.zeros(n_pol * G, dtype=torch.float64) if leaf_z.grad is None
                      else leaf_z.grad.detach().to(torch.float64).reshape(-1))
        loss.backward()
        if leaf.grad is None:
            grads = torch.zeros(K, n_pol * G, dtype=torch.float64)
        else:
            grads = leaf.grad.detach().to(torch.float64).reshape(K, n_pol * G)
        # the loss averages over K x 2G responses, a step's over 2G: times K, then times n_pol
        # as experiment._logp_grad does
        grads = grads * (K * n_pol)                                # [K, 2G]
        if not bool(torch.isfinite(grads).all()):
            return None
        if alone is not None and not torch.allclose(grad_z * n_pol, grads[kz], rtol=0.0, atol=STEP_ATOL):
            return None
        # every step at once: theta_k - LR * grad(theta_k) lands on the guide's theta_{k+1}?
        landed = x._sgd_step(guide[:K], lsm_k, (torch.arange(K)[:, None], rows, arms_k), grads)
        if not torch.allclose(landed, guide[1:], rtol=0.0, atol=STEP_ATOL):
            return None
        grads_seen = list(grads.unbind(0))
        # every epoch's clip fractions at once
        clip = x._clip_fractions(adv_k > 0, adv_k < 0, torch.exp(logp_k - old_k), n_pol, G)
    except Exception:  # noqa: BLE001 - a raise: the step-by-step run says where (the grading's
        return None    # own failures, time or memory, are BaseExceptions and go through)
    probs_seen.append(torch.softmax(guide[-1], -1))
    return x._history(probs_seen, rewards_seen, clip.unbind(0), grads_seen)
