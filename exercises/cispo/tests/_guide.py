"""The judge's fast path for cispo's T3 toy (the learner's experiment.py is the plain loop).

T3 checks the submission's lanes along the reference's: ``run(experiment, sub, out_dir,
guide=trajectory(experiment, ref))`` makes its calls at the reference's weights, all 30 steps in
one batch (one round trip to the sandbox instead of 30), with the judge's side of every step
(sampling, log-probs, advantages, statistics, the gradient steps) computed for all steps at
once; each step is checked against the reference's next weights, and lanes that stray are
trained step by step (``experiment._train``), so the metrics are always those of the plain loop.
tests/test_experiments.py checks that they are.
"""

from __future__ import annotations

import math

import torch

from judge.testing import batch, check_tensor

STEP_ATOL = 1e-12  # a guided step lands this close to the reference's next logits, or the lanes are
                   # trained step by step (LR = 20: rounding moves a step by ~1e-14; T3 compares at 1e-6)


def run(experiment, impl, out_dir=None, seed: int = 0, guide=None) -> dict:
    """``experiment.run(impl, out_dir, seed)``, its lanes checked along ``guide`` (the reference's
    ``trajectory``) with all its calls in one batch, and trained step by step only if they stray."""
    def train(impl, z0, g):
        made = train_guided(experiment, impl, z0, g, guide) if guide is not None else None
        return made if made is not None else experiment._train(impl, z0, g)

    return experiment.run(impl, out_dir, seed, train=train)


def _inputs(x, hist: torch.Tensor, u: torch.Tensor, valid: torch.Tensor, lengths: torch.Tensor):
    """``_Trainer.prepare`` for every step at once: ``hist`` [T + 1, K, L, V] the weights the steps
    start from (the guide's), ``u`` [T, B, L], ``valid`` [T, B, L], ``lengths`` [T, B].
    Returns the leaf z [T, K, L, V] and logp, rollout_logp [T, K*B, L], advantages [T, K*B]."""
    T = u.shape[0]
    z_sampler = hist[x._SAMPLER_STEP, x._LANES]                        # [T, K, L, V], k steps old
    cdf = torch.softmax(z_sampler, dim=-1).cumsum(-1)                  # [T, K, L, V]
    actions = (u[:, None, :, :, None] > cdf[:, :, None]).sum(-1).clamp(max=x.V - 1)  # [T, K, B, L]

    def gather(logits):                                                # [T, K, L, V] -> [T, K*B, L]
        logpi = torch.log_softmax(logits, dim=-1)[:, :, None].expand(-1, -1, x.B, -1, -1)
        return logpi.gather(-1, actions[..., None]).squeeze(-1).reshape(T, x.K * x.B, x.L)

    rollout_logp = gather(z_sampler)                                   # log pi_{t-k}(a)
    z = hist[:T].clone().requires_grad_(True)
    logp = gather(z)                                                   # log pi_t(a), differentiable
    r_tok = x._REWARD[actions]                                         # [T, K, B, L]
    R = (r_tok * valid[:, None]).sum(-1) / lengths[:, None]            # [T, K, B]
    adv = (R - R.mean(dim=-1, keepdim=True)).reshape(T, x.K * x.B)
    return z, logp, rollout_logp, adv


def _stats(x, weights: list, ratio: torch.Tensor, valid: torch.Tensor, n_valid: list) -> list:
    """``experiment._record_stats`` for every step and anchor at once: ``weights`` [T][A] answers
    [K*B, L], ``ratio`` [T, A, K*B, L], ``valid`` [T, B, L]. Per step and anchor: (clip fraction,
    w_min, w_max, max |r - 1|, r_min, r_max), each a list over lanes; the same values (minima,
    maxima and counts are exact)."""
    T, A = len(weights), len(weights[0])
    with torch.no_grad():
        w = torch.stack([torch.stack(row) for row in weights]).view(T, A, x.K, x.B, x.L)
        ratio = ratio.view(T, A, x.K, x.B, x.L)
        v = valid[:, None, None]                                        # [T, 1, 1, B, L]
        both = torch.stack([w, ratio])                                  # [2, T, A, K, B, L]
        lows = torch.where(v, both, math.inf).amin((-2, -1))            # [2, T, A, K]
        highs = torch.where(v, both, -math.inf).amax((-2, -1))
        dev = torch.where(v, (ratio - 1).abs(), -math.inf).amax((-2, -1))  # [T, A, K]
        clipped = ((w - ratio).abs() > 1e-9 * (1.0 + ratio)) & v
        (w_min, r_min), (w_max, r_max) = lows.tolist(), highs.tolist()
        dev, n_clipped = dev.tolist(), clipped.sum((-2, -1)).tolist()
    return [[([c / n_valid[t] for c in n_clipped[t][a]], w_min[t][a], w_max[t][a], dev[t][a],
              r_min[t][a], r_max[t][a]) for a in range(A)] for t in range(T)]


def _weights(x, b, logp, anchor_logp, mask):
    """``_Trainer.send``'s weights call (queued in ``b``)."""
    with torch.no_grad():
        return b.cispo_weights(logp.detach(), anchor_logp, mask, eps_low=x.EPS_LOW, eps_high=x.EPS_HIGH)


def _plain(x, w, shape) -> bool:
    """Weights the vectorised statistics take as they are (``_Trainer.receive``'s test)."""
    return (type(w) is torch.Tensor and w.layout == torch.strided and w.device.type == "cpu"
            and w.dtype in x._FLOAT_DTYPES and tuple(w.shape) == shape)


def train_guided(experiment, impl, z0: torch.Tensor, g: torch.Generator, guide: torch.Tensor):
    """``experiment._train``'s trainers, checked step by step along the reference's weights
    ``guide`` [anchors, STEPS + 1, K, L, V]; None when a step strays from it.

    Each step's calls need the weights the step starts from. Along the reference's lanes those
    are known in advance, so every step's inputs are made at once from the guide's weights and
    the step's common random numbers (drawn in the plain loop's order), and the calls go out in
    one batch, per anchor:

    - each step's loss, with the plain loop's arguments detached: its value is a metric
      (loss - REINFORCE), so each step keeps its own call;
    - one loss over every step's rows, [STEPS * K * B, L], for the gradient: rows meet only in
      the token-mean, so step t's gradient is this one's times sum_t N_t / N_t (N_t: step t's
      valid tokens), to within rounding; a loss whose rows meet otherwise strays;
    - the weights, elementwise by the spec, in one call over every step's rows, and step 0's own
      call, which must give the same rows (weights that depend on the batch they come in are
      trained step by step).

    Each step z_t - LR * grad(z_t) is then checked against the reference's z_{t+1}
    (``STEP_ATOL``). When every step lands there, the lanes ``experiment._train`` would train are
    these: they start at z0 and each step lands where the reference's does, to within rounding
    (an action drawn at a weight ~1e-12 away would flip only for a uniform that close to a CDF
    step: its lane would then stray, and be trained step by step). The statistics and the history
    are the submission's own: its weights, its loss values, its steps. Anything else (a stray
    step, a raise, an answer of another shape, type or dtype) returns None, and the lanes are
    trained step by step, which also says what went wrong; the generator is then where the plain
    loop expects it.
    """
    x = experiment
    T, A = x.STEPS, len(x.ANCHORS)
    if tuple(guide.shape) != (A, T + 1, x.K, x.L, x.V) or guide.dtype != x.DTYPE:
        return None
    mine = torch.Generator().set_state(g.get_state())       # g stays put for a step-by-step run
    draws = [x._Draw(mine) for _ in range(T)]
    u = torch.stack([d.u for d in draws])                    # [T, B, L]
    valid = torch.stack([d.valid for d in draws])            # [T, B, L]
    lengths = torch.stack([d.lengths for d in draws])        # [T, B]
    made = [_inputs(x, guide[a], u, valid, lengths) for a in range(A)]
    rows = x.K * x.B
    try:
        calls, whole = [], []           # [T][A]: (logp, anchor_logp, adv, loss, w, old_logp); [A]: (w, loss)
        with batch(impl) as b:
            for t, draw in enumerate(draws):
                step = []
                for anchor, (z, logp, rollout_logp, adv) in zip(x.ANCHORS, made):
                    lp = logp[t].detach()
                    old_logp = lp.clone()                    # fresh recompute, detached
                    with torch.no_grad():                    # the step's loss value: a metric
                        loss = b.cispo_loss(lp, old_logp, adv[t], draw.mask, rollout_logp=rollout_logp[t],
                                            anchor=anchor, eps_low=x.EPS_LOW, eps_high=x.EPS_HIGH)
                    anchor_logp = old_logp if anchor == "old" else rollout_logp[t]
                    first = _weights(x, b, lp, anchor_logp, draw.mask) if t == 0 else None
                    step.append((lp, anchor_logp, adv[t], loss, first, old_logp))
                calls.append(step)
            mask = torch.cat([d.mask for d in draws])        # [T*K*B, L]
            for a, (anchor, (z, logp, rollout_logp, adv)) in enumerate(zip(x.ANCHORS, made)):
                flat = logp.reshape(T * rows, x.L)               # [T*K*B, L], on z's graph
                grad_loss = b.cispo_loss(flat, torch.cat([step[a][5] for step in calls]), adv.reshape(T * rows),
                                         mask, rollout_logp=rollout_logp.reshape(T * rows, x.L), anchor=anchor,
                                         eps_low=x.EPS_LOW, eps_high=x.EPS_HIGH)
                whole.append((_weights(x, b, flat, torch.cat([step[a][1] for step in calls]), mask), grad_loss))
        # the ratios the statistics compare the weights with, while the submission computes: from
        # the inputs as the calls got them (the plain loop's are as sent too when it reads them)
        with torch.no_grad():
            ratio = torch.stack([torch.stack([torch.exp(c[0] - c[1]) for c in step]) for step in calls])
        losses = [[check_tensor(c[3].value, what="cispo_loss", shape=()) for c in step] for step in calls]
        n_valid = torch.tensor([float(d.n_valid) for d in draws], dtype=x.DTYPE)   # [T], one lane's tokens
        for _, grad_loss in whole:
            # d (stacked loss) / d z_t is step t's (loss * K) gradient times n_t / (K * sum_t n_t)
            check_tensor(grad_loss.value, what="cispo_loss", shape=()).backward()
        weights = []                                         # [A]: [T, K*B, L]
        for a, (pending, _) in enumerate(whole):
            w, w0 = pending.value, calls[0][a][4].value
            if not (_plain(x, w, (T * rows, x.L)) and _plain(x, w0, (rows, x.L)) and w.dtype == w0.dtype
                    and torch.allclose(w[:rows], w0, rtol=1e-12, atol=0.0, equal_nan=True)):
                return None                                  # not elementwise, or not a plain tensor
            weights.append(w.view(T, rows, x.L))
        weights = [[weights[a][t] for a in range(A)] for t in range(T)]
        trainers = []
        for a, (anchor, (z, *_)) in enumerate(zip(x.ANCHORS, made)):
            grad = z.grad * (x.K * n_valid.sum() / n_valid)[:, None, None, None]
            steps = z.detach() - x.LR * grad                  # [T, K, L, V]
            if not torch.allclose(steps, guide[a, 1:], rtol=0.0, atol=STEP_ATOL):
                return None
            tr = x._Trainer(anchor, z0)
            tr.history[1:] = steps
            with torch.no_grad():
                for t, draw in enumerate(draws):             # receive()'s comparison, step by step
                    lp, _, adv, _, _, _ = calls[t][a]
                    reinforce = -(adv[:, None] * lp * draw.mask).sum() / draw.mask.sum()
                    tr.loss_vs_reinforce = max(tr.loss_vs_reinforce,
                                               abs(float(losses[t][a].detach()) - float(reinforce)))
            trainers.append(tr)
        table = _stats(x, weights, ratio, valid, [d.n_valid for d in draws])
    except Exception:  # noqa: BLE001 - a raise: the step-by-step run says where (the grading's
        return None    # own failures, time or memory, are BaseExceptions and go through)
    for t in range(T):
        for tr, row in zip(trainers, table[t]):
            tr.steps.append(row)
    g.set_state(mine.get_state())                            # where the plain loop leaves it
    return trainers


def trajectory(experiment, impl) -> torch.Tensor:
    """[anchors, STEPS + 1, K, L, V] float64: the weights of ``impl``'s lanes after every step,
    from the plain loop (seed 0); the reference's is the ``guide`` of ``run``."""
    out = {}

    def train(impl, z0, g):
        trainers = experiment._train(impl, z0, g)
        out["guide"] = torch.stack([tr.history for tr in trainers]).detach().clone()
        return trainers

    experiment.run(impl, None, 0, train=train)
    return out["guide"]
