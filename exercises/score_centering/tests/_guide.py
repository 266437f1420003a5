"""The judge's fast path for score_centering's T3 toy (the learner's experiment.py is the plain run).

T3 checks the submission's SC runs along the reference's: ``run(experiment, sub, out_dir,
guide=trajectory(experiment, ref))`` sends all 150 calls in one batch (one round trip to the
sandbox instead of 50) and checks each step against the reference's next logits; runs that stray
are taken step by step (``experiment._run``), so the metrics are always those of the plain run.
tests/test_experiments.py checks that they are.
"""

import torch

from judge.testing import batch

STEP_ATOL = 1e-13  # a guided step lands this close to the reference's next logits, or the runs go
                   # step by step (50 steps: <= 5e-12 apart; T3 compares at 1e-9 and 1e-10)


def run(experiment, impl, out_dir=None, seed=0, guide=None):
    """``experiment.run(impl, out_dir, seed)``, its SC runs checked along ``guide`` (the
    reference's ``trajectory``) in one batch of calls, and taken step by step only if they stray."""
    def runs(impl, z0, q, log_q, heads, A):
        made = runs_guided(experiment, impl, z0, q, log_q, heads, A, guide) if guide is not None else None
        return made if made is not None else experiment._run(impl, z0, q, log_q, heads, A)

    return experiment.run(impl, out_dir, seed, runs=runs)


def runs_guided(experiment, impl, z0, q, log_q, heads, A, guide):
    """``experiment._run``'s runs, checked step by step along the reference's SC runs ``guide``
    [heads, STEPS + 1, V]; None when a step strays from it.

    Each SC step is one call at the logits it starts from. Along the reference's runs those
    logits are known in advance, so all 150 calls go out in one batch (one round trip to the
    sandbox instead of 50), and each step z_t - LR * grad(z_t) is checked against the reference's
    z_{t+1} (``STEP_ATOL``) while the later steps compute. When every step lands there, the runs
    ``experiment._run`` would make are these: they start at z0, and each of their steps lands where the
    reference's does, to within rounding (the toy damps a stray, measured: 2e-9 off after a
    step, 4e-10 at the end; so 50 steps stray at most 50 * STEP_ATOL, below T3's tolerances).
    The curves are drawn from the submission's own steps z_t - LR * grad(z_t). Each call gets
    its own inputs, so a write into them changes nothing later. Anything else (a stray step, a
    raise) returns None, and the steps are taken one by one (``experiment._run``), which also
    says what went wrong.
    """
    x = experiment
    V = log_q.shape[0]
    if tuple(guide.shape) != (len(heads), x.STEPS + 1, V) or guide.dtype != x.D:
        return None
    rollout, adv, grad_logp = x._invariants(q, log_q, A)
    plain = [z0.clone()]
    sc = [[z0.clone()] for _ in heads]

    def land(t: int, step: list) -> bool:
        """Step t's answers: the next logits of each run, if each lands on the guide's."""
        for h, z, pending in step:
            z = x._step_sc(z, pending)
            if not torch.allclose(z, guide[h, t + 1], rtol=0.0, atol=STEP_ATOL):
                return False
            sc[h].append(z)
        return True

    try:
        with batch(impl) as b:
            previous = None
            for t in range(x.STEPS):
                step = []
                for h, ids in enumerate(heads):
                    z = guide[h, t].clone()                        # [V], the leaf of this call
                    step.append((h, z, x._queue_sc(b, z, log_q, ids, rollout, adv)))
                plain.append(x._step_plain(plain[-1], grad_logp))  # while impl computes
                if previous is not None and not land(t - 1, previous):
                    return None
                previous = step
        if not land(x.STEPS - 1, previous):
            return None
    except Exception:  # noqa: BLE001 - a raise: the step-by-step run says where (the grading's
        return None    # own failures, time or memory, are BaseExceptions and go through)
    return [plain] + sc


def trajectory(experiment, impl):
    """[len(HEADS), STEPS + 1, V] float64: the logits z_t of ``impl``'s SC runs; the reference's
    is the ``guide`` of ``run``."""
    z0, log_q, q, heads = experiment._setup()
    runs = experiment._run(impl, z0, q, log_q, heads, 1.0)
    return torch.stack([torch.stack(zs) for zs in runs[1:]]).detach()
