"""The judge's fast path for grpo's T3 toy (the learner's experiment.py is the plain run).

T3 checks the submission's bandit along the reference's: ``run(experiment, sub, out_dir,
guide=trajectory(experiment, ref))`` sends all 180 calls in one batch (one round trip to the
sandbox instead of one per step) and checks each step against the reference's next logits; a run
that strays is trained step by step (``experiment._train``), so the metrics are always those of
the plain run. tests/test_experiments.py checks that they are.
"""

from __future__ import annotations

import torch

from judge.testing import batch

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
    losses) go out in one batch, not one round trip to the sandbox per step, and each epoch's
    step theta_k - LR * grad(theta_k) is checked against the reference's theta_{k+1}
    (``STEP_ATOL``) while later calls compute. When every step lands there, the run ``experiment._train``
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
    if tuple(guide.shape) != (ITERATIONS * EPOCHS + 1, n_pol, n_arms) or guide.dtype != torch.float64:
        return None
    uniforms, rows, mask = x._setup(seed)
    probs_seen, rewards_seen, arms_seen, advs = [], [], [], []
    logps, old_logps, grads_seen = [], [], []   # per epoch, [2G] each

    def read(it: int, epochs: list) -> bool:
        """Iteration ``it``'s answers: do its epochs' steps, taken from the guide's logits with
        the submission's gradients, land on the guide's next logits? (all four at once)"""
        for logp_leaf, pending in epochs:
            g_logp = x._logp_grad(pending, logp_leaf)
            if g_logp is None:                                     # not finite
                return False
            grads_seen.append(g_logp)
        k = it * EPOCHS
        thetas = guide[k:k + EPOCHS]                               # [E, 2, 4]
        landed = x._sgd_step(thetas, torch.log_softmax(thetas, -1),
                             (torch.arange(EPOCHS)[:, None], rows, arms_seen[it]),
                             torch.stack(grads_seen[k:k + EPOCHS]))
        return torch.allclose(landed, guide[k + 1:k + EPOCHS + 1], rtol=0.0, atol=STEP_ATOL)

    try:
        with batch(impl) as b:
            for it in range(ITERATIONS):                           # every iteration's advantages
                probs = torch.softmax(guide[it * EPOCHS], -1)      # [2, 4]
                arms, rewards, pending = x._draw_group(b, probs, uniforms[it])
                advs.append(pending)
                probs_seen.append(probs)
                rewards_seen.append(rewards)
                arms_seen.append(arms.reshape(-1))                 # [2G]
            shared, previous = [(mask, mask._version)], None     # inputs that several calls get
            for it in range(ITERATIONS):                           # every epoch's loss, checked
                adv = torch.cat([x._advantages(a) for a in advs[it]])   # [2G]
                if tuple(adv.shape) != (n_pol * G,):
                    return None
                advs[it] = adv
                flat_arms = arms_seen[it]
                old_logp = torch.log_softmax(guide[it * EPOCHS], -1)[rows, flat_arms]   # [2G]
                shared += [(adv, adv._version), (old_logp, old_logp._version)]
                epochs = []
                for epoch in range(EPOCHS):
                    logp = torch.log_softmax(guide[it * EPOCHS + epoch], -1)[rows, flat_arms]  # [2G]
                    logp_leaf = logp.unsqueeze(-1).clone().requires_grad_(True)
                    epochs.append((logp_leaf, b.grpo_loss(logp_leaf, old_logp.unsqueeze(-1), adv,
                                                          mask, clip_low=x.CLIP_LOW,
                                                          clip_high=x.CLIP_HIGH)))
                    logps.append(logp)
                    old_logps.append(old_logp)
                # the previous iteration's answers are in by now: read while these compute
                if previous is not None and not read(*previous):
                    return None
                previous = (it, epochs)
        # a call that wrote into an input several calls get: the step-by-step run's later calls
        # would see what it wrote, and here some were sent before
        if not read(*previous) or any(t._version != v for t, v in shared):
            return None
        # every epoch's clip fractions at once
        epoch_adv = torch.stack(advs).repeat_interleave(EPOCHS, 0)                # [K, 2G]
        clip = x._clip_fractions(epoch_adv > 0, epoch_adv < 0,
                                 torch.exp(torch.stack(logps) - torch.stack(old_logps)), n_pol, G)
    except Exception:  # noqa: BLE001 - a raise: the step-by-step run says where (the grading's
        return None    # own failures, time or memory, are BaseExceptions and go through)
    probs_seen.append(torch.softmax(guide[-1], -1))
    return x._history(probs_seen, rewards_seen, clip.unbind(0), grads_seen)
