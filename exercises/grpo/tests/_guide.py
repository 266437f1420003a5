"""The judge's fast path for grpo's T3 toy (the learner's experiment.py is the plain run).

T3 checks the submission's bandit along the reference's: ``run(experiment, sub, out_dir,
guide=trajectory(experiment, ref))`` sends all 180 calls in one batch (one round trip to the
sandbox instead of one per step) and checks each step against the reference's next logits; a run
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


def train_guided(experiment, impl, seed: int, guide: torch.Tensor) -> list[dict] | None:
    """The run, checked step by step along the reference's trajectory ``guide``; None when a
    step strays from it.

    Every epoch of the run is one call at the logits the epoch starts from. Along the reference's
    trajectory those logits are known in advance, so all 180 calls (60 advantages, then 120
    losses) go out in one batch, not one round trip to the sandbox per step; the 120 losses
    get one backward (they are independent, so each leaf gets its own loss's gradient), and every
    epoch's step theta_k - LR * grad(theta_k) is checked at once against the reference's
    theta_{k+1} (``STEP_ATOL``). When every step lands there, the run ``experiment._train``
    would make is this one: it starts at the same logits, and each of its steps lands where the
    reference's does, to within rounding. The bandit damps a stray (measured: a step pushed 3e-8
    off is 1.8e-8 off at the end), so 120 steps stray at most ~1.2e-10 in all; T3 compares
    probabilities at 1e-5, and in the reference's run (seed 0) no discrete decision is closer
    than 8e-5 to flipping (a uniform to a step of the CDF, a ratio to a clip bound, P(arm 2) to
    0.9). The curves are built as ``_train`` builds them, from the submission's advantages, clip
    fractions and gradients. Anything else (a stray step, a shape, a raise, a non-finite
    gradient, an argument written in place) returns None, and ``run`` trains step by step
    instead (``experiment._train``), which also says what went wrong.
    """
    x = experiment
    n_pol, G, n_arms = len(x.VARIANTS), x.GROUP_SIZE, len(x.ARM_REWARDS)
    ITERATIONS, EPOCHS = x.ITERATIONS, x.EPOCHS
    K = ITERATIONS * EPOCHS
    if tuple(guide.shape) != (K + 1, n_pol, n_arms) or guide.dtype != torch.float64:
        return None
    uniforms, rows, mask = x._setup(seed)
    probs_seen, rewards_seen, arms_seen, advs = [], [], [], []
    leaves, losses = [], []                                # per epoch: [2G, 1] leaf, its pending loss

    try:
        with batch(impl) as b:
            for it in range(ITERATIONS):                           # every iteration's advantages
                probs = torch.softmax(guide[it * EPOCHS], -1)      # [2, 4]
                arms, rewards, pending = x._draw_group(b, probs, uniforms[it])
                advs.append(pending)
                probs_seen.append(probs)
                rewards_seen.append(rewards)
                arms_seen.append(arms.reshape(-1))                 # [2G]
            shared = [(mask, mask._version)]                       # inputs that several calls get
            # every epoch's logp [K, 2G] at once: log pi(arm) at the logits the epoch starts from
            arms_k = torch.stack(arms_seen).repeat_interleave(EPOCHS, 0)        # [K, 2G]
            lsm_k = torch.log_softmax(guide[:K], -1)                            # [K, 2, 4]
            logp_k = lsm_k[torch.arange(K)[:, None], rows, arms_k]              # [K, 2G]
            for it in range(ITERATIONS):                           # every epoch's loss
                adv = torch.cat([x._advantages(a) for a in advs[it]])   # [2G]
                if tuple(adv.shape) != (n_pol * G,):
                    return None
                advs[it] = adv
                old_logp = logp_k[it * EPOCHS].clone()             # [2G], frozen for the 4 epochs
                shared += [(adv, adv._version), (old_logp, old_logp._version)]
                for epoch in range(EPOCHS):
                    logp = logp_k[it * EPOCHS + epoch]             # [2G]
                    logp_leaf = logp.unsqueeze(-1).clone().requires_grad_(True)
                    losses.append(b.grpo_loss(logp_leaf, old_logp.unsqueeze(-1), adv, mask,
                                              clip_low=x.CLIP_LOW, clip_high=x.CLIP_HIGH))
                    leaves.append(logp_leaf)
        # every answer, then one backward for all of them: the losses are independent (each its
        # own call on its own leaf), so each leaf gets exactly its own loss's gradient, as the
        # step-by-step run's one backward per loss gives it
        values = [check_tensor(p.value, what="grpo_loss", shape=()) for p in losses]
        # a call that wrote into an input several calls get: the step-by-step run's later calls
        # would see what it wrote, and here some were sent before
        if any(t._version != v for t, v in shared):
            return None
        if not all(v.requires_grad for v in values):               # its backward() would raise
            return None
        torch.autograd.backward(values)
        grads = torch.stack([torch.zeros(n_pol * G, dtype=torch.float64) if leaf.grad is None
                             else leaf.grad.detach().to(torch.float64).reshape(-1) for leaf in leaves])
        grads = grads * n_pol                                      # [K, 2G], as experiment._logp_grad
        if not bool(torch.isfinite(grads).all()):
            return None
        # every step at once: theta_k - LR * grad(theta_k) lands on the guide's theta_{k+1}?
        landed = x._sgd_step(guide[:K], lsm_k, (torch.arange(K)[:, None], rows, arms_k), grads)
        if not torch.allclose(landed, guide[1:], rtol=0.0, atol=STEP_ATOL):
            return None
        grads_seen = list(grads.unbind(0))
        # every epoch's clip fractions at once
        epoch_adv = torch.stack(advs).repeat_interleave(EPOCHS, 0)                # [K, 2G]
        old_k = logp_k[::EPOCHS].repeat_interleave(EPOCHS, 0)                   # [K, 2G]
        clip = x._clip_fractions(epoch_adv > 0, epoch_adv < 0, torch.exp(logp_k - old_k), n_pol, G)
    except Exception:  # noqa: BLE001 - a raise: the step-by-step run says where (the grading's
        return None    # own failures, time or memory, are BaseExceptions and go through)
    probs_seen.append(torch.softmax(guide[-1], -1))
    return x._history(probs_seen, rewards_seen, clip.unbind(0), grads_seen)
