"""The judge's fast path for score_centering's T3 toy (the learner's experiment.py is the plain run).

T3 checks the submission's SC runs along the reference's: ``run(experiment, sub, out_dir,
guide=trajectory(experiment, ref))`` makes one call per head for all 50 steps (3 calls, one
round trip to the sandbox, instead of 150 calls in 50 round trips) and checks each step against
the reference's next logits; runs that stray are taken step by step (``experiment._run``), so
the metrics are always those of the plain run. tests/test_experiments.py checks that they are.
"""

import torch

from judge.testing import batch, check_tensor, sibling

cases = sibling(__file__, "_cases")

STEP_ATOL = 1e-13  # a guided step lands this close to the reference's next logits, or the runs go
                   # step by step (50 steps: <= 5e-12 apart; T3 compares at 1e-9 and 1e-10)


def run(experiment, impl, out_dir=None, seed=0, guide=None):
    """``experiment.run(impl, out_dir, seed)``, its SC runs checked along ``guide`` (the
    reference's ``trajectory``) in one call per head, and taken step by step only if they stray."""
    def runs(impl, z0, q, log_q, heads, A):
        made = runs_guided(experiment, impl, z0, q, log_q, heads, A, guide) if guide is not None else None
        return made if made is not None else experiment._run(impl, z0, q, log_q, heads, A)

    return experiment.run(impl, out_dir, seed, runs=runs)


def _queue_steps(experiment, b, zs, log_q, ids, rollout, adv):
    """Every step of one head's SC run in ONE sc_policy_loss call, queued in the batch ``b``.

    ``zs`` [T, V] are the logits the T steps start from (the guide's). A step of the plain run is
    one call of V rows, one per token a (``experiment._queue_sc``); here the T steps' rows are
    stacked, T * V rows. Rows do not interact in the loss but through its token-mean, so the
    gradient that reaches step t's logits is that step's own gradient divided by T (the mean over
    T * V rows instead of V). Returns (the leaf [T, V], the pending loss).
    """
    T, V, k = zs.shape[0], log_q.shape[0], ids.shape[0]
    z = zs.clone().requires_grad_(True)                                  # [T, V], one leaf per step
    lp = cases.log_softmax(z)             # [T, V] (torch.log_softmax splits the T rows over threads)
    logp = lp[:, experiment.TOKENS].reshape(T * V, 1)                    # step t's rows: t*V .. t*V+V-1
    train_head = lp[:, ids].unsqueeze(1).expand(T, V, k).reshape(T * V, 1, k)  # one prefix per step
    sampler_head = log_q[ids].expand(T * V, k).reshape(T * V, 1, k)
    mask = torch.ones(T * V, 1, dtype=torch.bool)
    return z, b.sc_policy_loss(logp, rollout.repeat(T, 1), train_head, sampler_head, adv.repeat(T), mask,
                               mode="none")


def runs_guided(experiment, impl, z0, q, log_q, heads, A, guide):
    """``experiment._run``'s runs, checked step by step along the reference's SC runs ``guide``
    [heads, STEPS + 1, V]; None when a step strays from it.

    Each SC step is a call at the logits it starts from. Along the reference's runs those logits
    are known in advance, so each head's STEPS steps go out as one call of STEPS * V rows
    (``_queue_steps``: the three heads' calls in one batch, one round trip to the sandbox), and
    each step z_t - LR * grad(z_t) is checked against the reference's z_{t+1} (``STEP_ATOL``).
    When every step lands there, the runs ``experiment._run`` would make are these: they start
    at z0, and each of their steps lands where the reference's does, to within rounding (the toy
    damps a stray, measured: 2e-9 off after a step, 4e-10 at the end; so 50 steps stray at most
    50 * STEP_ATOL, below T3's tolerances). A loss whose rows interact other than through the
    token-mean (or that depends on the number of rows) gives other gradients on the stacked rows
    than on one step's: it strays, and is run step by step. The curves are drawn from the
    submission's own steps z_t - LR * grad(z_t). Each call gets its own inputs, so a write into
    them changes nothing later. Anything else (a stray step, a raise, an answer of another shape)
    returns None, and the steps are taken one by one (``experiment._run``), which also says what
    went wrong.
    """
    x = experiment
    T, V = x.STEPS, log_q.shape[0]
    if tuple(guide.shape) != (len(heads), T + 1, V) or guide.dtype != x.D:
        return None
    rollout, adv, grad_logp = x._invariants(q, log_q, A)
    plain = [z0.clone()]
    try:
        with batch(impl) as b:
            queued = [_queue_steps(x, b, guide[h, :T], log_q, ids, rollout, adv) for h, ids in enumerate(heads)]
            for _ in range(T):                                 # while impl computes
                plain.append(x._step_plain(plain[-1], grad_logp))
        sc = []
        for h, (z, pending) in enumerate(queued):
            check_tensor(pending.value, what="sc_policy_loss", shape=()).backward()
            steps = z.detach() - x.LR * (z.grad * T)           # [T, V]: each step's own gradient
            if not torch.allclose(steps, guide[h, 1:], rtol=0.0, atol=STEP_ATOL):
                return None
            sc.append([z0.clone(), *steps.unbind(0)])
    except Exception:  # noqa: BLE001 - a raise: the step-by-step run says where (the grading's
        return None    # own failures, time or memory, are BaseExceptions and go through)
    return [plain] + sc


def trajectory(experiment, impl):
    """[len(HEADS), STEPS + 1, V] float64: the logits z_t of ``impl``'s SC runs; the reference's
    is the ``guide`` of ``run``."""
    z0, log_q, q, heads = experiment._setup()
    runs = experiment._run(impl, z0, q, log_q, heads, 1.0)
    return torch.stack([torch.stack(zs) for zs in runs[1:]]).detach()
