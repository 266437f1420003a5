"""The glm5_mis toy, run through YOUR masked_is_weights and offpolicy_loss.

1. Ratio sweep. One response of 100 tokens whose current-to-rollout ratios run from 0.505 to
   1.495 (no ratio sits on a bound: the endpoints are T2's business). It plots your weights next
   to a clamp (what TIS would do), and the gradient your loss actually sends to each log-prob.
2. Stale two-action bandit. Logits z (start [0, 0]), rewards [1, 0], learning rate 2, 20 updates.
   The rollout policy q is a snapshot of the policy taken every 5 updates, so inside a window the
   data grows stale. Each update uses the exact expectation over q: a batch of two one-token
   responses, one per action a, with rollout_logp = log q_a and advantage
   2 * q_a * (R_a - E_q[R]) (the 2 undoes the loss's division by N = 2 valid tokens), so that
   -dL/dz = E_{a~q}[ w_a (R_a - E_q R) grad log pi_a ]. Once the snapshot has gone stale both
   ratios leave (0.8, 1.2): every token is rejected and the update is exactly zero.
   The comparison curve, the same bandit with the weight clamped instead of zeroed, never calls
   your code: it is computed once per process, while your code computes the sweep.

How it runs: the calls, their order and their arguments are those of one call after the other.
Each update's two calls (the loss and the weights) go out together, one round trip; what their
answers feed (the next logits, the update's metrics) is computed before your code is called again,
and the metrics become Python numbers in one conversion at the end.

Run it on your file:  python exercises/glm5_mis/experiment.py --impl my_solution.py --out figs/
"""

from __future__ import annotations

import functools

import torch

from judge.views import save as save_views
from judge.testing import batch, check_tensor  # batch: independent calls, one round trip to the sandbox

CLIP_LOW = 0.2
CLIP_HIGH = 0.2
SWEEP_RATIOS = [0.505 + 0.01 * k for k in range(100)]
REWARDS = [1.0, 0.0]
LR = 2.0
UPDATES = 20
REFRESH_EVERY = 5

# Loop-invariant tensors, built once. None of them is ever passed to a submission (each run passes
# fresh tensors), so a submission that writes into its inputs cannot change them.
_SWEEP_RATIOS = torch.tensor(SWEEP_RATIOS, dtype=torch.float64)           # r [K]
_SWEEP_LOG_RATIOS = torch.log(_SWEEP_RATIOS)[None, :]                     # log r [1, K]
_SWEEP_RATIO_LIST = _SWEEP_RATIOS.tolist()
_SWEEP_CLAMPED = _SWEEP_RATIOS.clamp(1 - CLIP_LOW, 1 + CLIP_HIGH)         # clamp(r, 0.8, 1.2) [K]
_SWEEP_CLAMPED_LIST = _SWEEP_CLAMPED.tolist()
_REWARDS = torch.tensor(REWARDS, dtype=torch.float64)                     # R [2]


def send_ratio_sweep(impl):
    """Send the sweep's two calls (one round trip) and return ``finish()``, which reads the answers
    and returns the sweep's metrics: the caller works between the two while the submission computes.
    Weights and gradients of ``impl`` over a grid of ratios (float64, advantage +1)."""
    K = len(SWEEP_RATIOS)
    rollout_logp = torch.full((1, K), -1.0, dtype=torch.float64)          # [1, K]
    logp = rollout_logp + _SWEEP_LOG_RATIOS                               # [1, K]
    mask = torch.ones(1, K, dtype=torch.bool)                             # [1, K]
    lp = logp.clone().requires_grad_(True)  # a leaf [1, K]: the loss's gradient lands in lp.grad
    with batch(impl) as b:  # the weights and the loss of the same inputs: one round trip
        w = b.masked_is_weights(logp, rollout_logp, mask, clip_low=CLIP_LOW, clip_high=CLIP_HIGH)
        loss = b.offpolicy_loss(lp, rollout_logp, torch.ones(1, dtype=torch.float64), mask,
                                clip_low=CLIP_LOW, clip_high=CLIP_HIGH)

    def finish() -> dict:
        w_ = check_tensor(w.value, what="masked_is_weights", shape=(1, K))
        loss_ = check_tensor(loss.value, what="offpolicy_loss", shape=())
        loss_.backward()
        # -N * dL/dlogp is the per-token weight on grad log pi (= w * A with A = 1).
        push = (-K * lp.grad)[0] if lp.grad is not None else torch.zeros(K, dtype=torch.float64)
        w_ = w_.detach()[0]                                               # [K]
        return {
            "sweep_ratios": list(_SWEEP_RATIO_LIST),
            "sweep_weights": w_.tolist(),
            "sweep_grad": push.tolist(),
            "sweep_clamped": list(_SWEEP_CLAMPED_LIST),
            "sweep_retained": int((w_ != 0).sum()),
            "sweep_clamp_gap": float((_SWEEP_CLAMPED - w_).abs().sum()),
        }

    return finish


def ratio_sweep(impl) -> dict:
    """The sweep's metrics (``send_ratio_sweep`` and its ``finish`` without work in between)."""
    return send_ratio_sweep(impl)()


def _bandit(send, receive, trace: list | None = None) -> dict:
    """Run the stale bandit. ``send(logp, rollout_logp, adv)`` ([2, 1], [2, 1], [2]) starts one
    update and returns what ``receive`` needs to finish it: (dL/dlogp [2, 1], weights [2, 1]).
    ``trace`` receives the logits [2] before every update, then the last ones.

    Everything an update's answers feed (the next logits, the retained mass, the log-ratios, the
    zero-gradient flag) is computed before the next ``send``: a submission's later calls cannot
    change it, and a malformed answer raises where one call after the other would have raised.
    The per-update metrics stay tensors and become Python numbers in one conversion at the end.
    """
    z = torch.zeros(2, dtype=torch.float64)                               # logits [2]
    pi_z, zero_flags, retained, log_ratios = [], [], [], []               # one entry per update
    for k in range(UPDATES):
        if trace is not None:
            trace.append(z)
        if k % REFRESH_EVERY == 0:
            q_logp = torch.log_softmax(z, 0)                              # the rollout snapshot [2]
        logp = torch.log_softmax(z, 0)                                    # [2]
        # q is read from q_logp at every update: a submission may have written into rollout_logp.
        q = q_logp.exp()                                                  # [2]
        sent = send(logp[:, None], q_logp[:, None], _advantages(q))
        pi_z.append(torch.softmax(z, 0))  # the policy before this update, while the answers come
        g_logp, w = receive(sent)
        g_logp, w = g_logp[:, 0], w[:, 0]                                 # [2], [2]
        z = _update(z, logp, g_logp)
        zero_flags.append((g_logp == 0).all())                            # [] bool
        retained.append((q * (w != 0)).sum())                             # [] float64
        log_ratios.append(logp - q_logp)                                  # [2]
    if trace is not None:
        trace.append(z)
    pi_z.append(torch.softmax(z, 0))
    return _bandit_metrics(pi_z, zero_flags, retained, log_ratios)


def _advantages(q):
    """[2]: 2 * q_a * (R_a - E_q[R]), the exact expectation over a ~ q as two one-token responses
    (the 2 undoes the loss's division by N = 2 valid tokens)."""
    return 2.0 * q * (_REWARDS - (q * _REWARDS).sum())


def _update(z, logp, g_logp):
    """z - LR * dL/dz [2], from dL/dlogp [2] through logp = log_softmax(z)."""
    return z - LR * (g_logp - logp.exp() * g_logp.sum())


def _bandit_metrics(pi_z, zero_flags, retained, log_ratios) -> dict:
    """The bandit's metrics from its per-update policies [2] (and the last), zero-gradient flags,
    retained rollout mass and log-ratios [2]."""
    # (one softmax per update, not one over the stacked logits: torch would spread that over threads)
    p_best = torch.stack(pi_z)[:, 0].tolist()                             # [UPDATES + 1]
    zero_steps = [k for k, zero in enumerate(torch.stack(zero_flags).tolist()) if zero]
    return {"p_best": p_best, "final_p_best": p_best[-1], "zero_grad_updates": len(zero_steps),
            "zero_grad_steps": zero_steps, "retained_mass": torch.stack(retained).tolist(),
            "ratios": torch.stack(log_ratios).exp().tolist()}             # [UPDATES][2]


def stale_bandit(impl, trace: list | None = None) -> dict:
    mask = torch.ones(2, 1, dtype=torch.bool)  # [2, 1], the same tensor at every update

    def send(logp, rollout_logp, adv):
        with batch(impl) as b:  # the loss and the weights of one update: one round trip
            return _queue_update(b, logp, rollout_logp, adv, mask)

    return _bandit(send, _read_update, trace)


def _queue_update(b, logp, rollout_logp, adv, mask):
    """One update's two calls, queued in ``b``: the loss on a fresh leaf copy of logp [2, 1]
    (its gradient lands there) and the weights; ``_read_update`` reads them."""
    lp = logp.clone().requires_grad_(True)
    loss = b.offpolicy_loss(lp, rollout_logp, adv, mask, clip_low=CLIP_LOW, clip_high=CLIP_HIGH)
    w = b.masked_is_weights(logp, rollout_logp, mask, clip_low=CLIP_LOW, clip_high=CLIP_HIGH)
    return lp, loss, w


def _read_update(sent):
    """(dL/dlogp [2, 1], weights [2, 1]) of a ``_queue_update``."""
    lp, loss, w = sent
    check_tensor(loss.value, what="offpolicy_loss", shape=()).backward()
    g = lp.grad if lp.grad is not None else torch.zeros_like(lp)
    return g, check_tensor(w.value, what="masked_is_weights", shape=tuple(lp.shape)).detach()


@functools.cache
def clamped_bandit() -> dict:
    """The same bandit with the weight clamped to [0.8, 1.2] instead of zeroed (for comparison).

    It calls no submission, so it is computed once per process; the dict is shared: read it only.
    """

    def send(logp, rollout_logp, adv):
        w = (logp - rollout_logp).exp().clamp(1 - CLIP_LOW, 1 + CLIP_HIGH)
        return -w * adv[:, None] / 2.0, w

    return _bandit(send, lambda answer: answer)


def run(impl, out_dir=None, seed: int = 0, bandit=None) -> dict:
    """Run the sweep and the bandit through ``impl``; writes metrics.json and the views when ``out_dir`` is given.

    The toy is deterministic: ``seed`` is accepted for the common interface and not used.
    ``bandit``: what runs the stale bandit (default ``stale_bandit``; the judge's T3 passes a
    faster one with the same result, see tests/_guide.py).
    """
    finish_sweep = send_ratio_sweep(impl)
    clamp = clamped_bandit()  # no submission call: computed while the submission runs the sweep
    sweep = finish_sweep()
    bandit = (bandit or stale_bandit)(impl)
    metrics = {**sweep, **{f"bandit_{k}": v for k, v in bandit.items()},
               "clamp_final_p_best": clamp["final_p_best"],
               "clamp_zero_grad_updates": clamp["zero_grad_updates"],
               "clamp_p_best": list(clamp["p_best"])}  # the comparison curve views/bandit.vl.json draws
    if out_dir is not None:  # by hand (--out): metrics.json and the views, with your data
        save_views(__file__, metrics, out_dir)
    return metrics


def _load(path: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location("impl", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", required=True, help="your solution file")
    ap.add_argument("--out", default=None, help="folder for metrics.json and the views (*.vl.json)")
    args = ap.parse_args()
    m = run(_load(args.impl), args.out)
    print(f"sweep: {m['sweep_retained']} of {len(m['sweep_ratios'])} ratios retained")
    print(f"bandit: final P(best) = {m['bandit_final_p_best']:.4f}, "
          f"{m['bandit_zero_grad_updates']} updates with exactly zero gradient "
          f"(steps {m['bandit_zero_grad_steps']}); clamp instead: {m['clamp_final_p_best']:.4f}")
