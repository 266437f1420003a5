"""T3 toy for CISPO: an asynchronous sampler that lags the trainer by k steps.

A token-level bandit: L positions, V actions per position, a tabular softmax policy
(logits z[L, V], float64). Every training step:

  1. the SAMPLER, holding the trainer's weights from k steps ago, samples B responses
     (response i has n_i valid tokens) and reports rollout_logp = log pi_{t-k}(a);
  2. the TRAINER recomputes old_logp = log pi_t(a) fresh (experience prep), then takes exactly
     ONE gradient step (fully-async training: one minibatch, one epoch), so logp == old_logp at
     loss time;
  3. reward R_i = mean over response i's tokens of REWARD[a]; A_i = R_i - mean_j R_j.

Each staleness k in STALENESS and each anchor ("old", "rollout") trains its own policy. All
staleness lanes of one anchor share one call to `cispo_loss` (lanes are stacked along B with
the same mask, so the token-mean gives every lane the same 1/N; the loss is multiplied by the
number of lanes to restore each lane's own token-mean gradient). All lanes see the same random
numbers (common random numbers), so the k = 0 lanes of both anchors are identical.

What a correct CISPO shows (SkyRL PR #1859):
  * anchor "old": r = pi_theta / pi_old == 1 exactly at every step, clip fraction 0, the clamp
    is inert and the loss equals the plain REINFORCE loss -sum A * logp / N;
  * anchor "rollout": r = pi_theta / pi_rollout deviates from 1 as soon as k > 0, the clip
    fraction rises with k, and the weights always stay inside [1 - eps_low, 1 + eps_high].

How a step runs: the step's four calls (each anchor's loss, then its weights) go out in one
batch; then the answers are read in order, each anchor taking its gradient step, and the step's
statistics are recorded (vectorised over anchors and lanes, one .tolist()).

Standalone:  python exercises/cispo/experiment.py --impl my_solution.py --out figs/
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math

import torch

from judge.views import save as save_views
from judge.testing import batch, check_tensor  # batch: independent calls, one round trip to the sandbox

STALENESS = [0, 1, 2, 4, 8]
ANCHORS = ["old", "rollout"]
V, L, B = 6, 6, 16                            # actions, positions, responses per lane per step
STEPS, LR = 30, 20.0
EPS_LOW, EPS_HIGH = 0.2, 0.28                 # band [0.8, 1.28]
REWARD = [1.0, 0.6, 0.2, 0.0, 0.0, 0.0]       # per-token reward of each action
DTYPE = torch.float64
K = len(STALENESS)                            # staleness lanes per anchor

# Loop invariants.
_REWARD = torch.tensor(REWARD, dtype=DTYPE)                            # [V]
_LANES = torch.arange(K)
_POSITIONS = torch.arange(L)
# At step t the sampler of lane k holds the trainer's weights after max(0, t - k) steps: [STEPS, K]
_SAMPLER_STEP = torch.tensor([[max(0, t - k) for k in STALENESS] for t in range(STEPS)])
# Where (lane, position) starts in a flattened z[K, L, V]: [K, 1, L]
_Z_OFFSET = ((_LANES[:, None] * L + _POSITIONS) * V)[:, None, :]
# Weights of these dtypes, shaped [K*B, L], go to the vectorised step statistics (which cannot
# raise on them); anything else takes the per-lane path, which fails (or not) as it always did.
_FLOAT_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


def _sample(z_lanes: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sampling. z_lanes [K, L, V], u [B, L] shared by all lanes -> actions [K, B, L]."""
    cdf = torch.softmax(z_lanes, dim=-1).cumsum(-1)                  # [K, L, V]
    a = (u[None, :, :, None] > cdf[:, None, :, :]).sum(-1)           # [K, B, L]
    return a.clamp(max=V - 1)


def _gather_logp(z_lanes: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """log pi(a) for every lane: z_lanes [K, L, V], actions [K, B, L] -> [K, B, L]."""
    logpi = torch.log_softmax(z_lanes, dim=-1)                       # [K, L, V]
    logpi = logpi[:, None].expand(-1, actions.shape[1], -1, -1)      # [K, B, L, V]
    return logpi.gather(-1, actions[..., None]).squeeze(-1)


class _Draw:
    """One step's common random numbers, shared by every lane of both anchors."""

    def __init__(self, g: torch.Generator):
        self.u = torch.rand(B, L, generator=g, dtype=DTYPE)             # [B, L]
        self.lengths = torch.randint(1, L + 1, (B,), generator=g)       # [B], n_i
        self.valid = _POSITIONS[None, :] < self.lengths[:, None]        # [B, L]
        self.mask = self.valid.repeat(K, 1)                             # [K*B, L], what impl gets
        self.n_valid = int(self.lengths.sum())                          # valid tokens of one lane


class _Trainer:
    """One anchor's K staleness lanes: the weights' history, the step in flight, the statistics."""

    def __init__(self, anchor: str, z0: torch.Tensor):
        self.anchor = anchor
        self.history = torch.empty(STEPS + 1, K, L, V, dtype=DTYPE)  # [t] = z after t steps
        self.history[0] = z0
        self.inputs: tuple | None = None   # the next step's tensors, made before its calls go out
        self.sent: tuple | None = None     # the step in flight: its tensors and Pending answers
        self.steps: list[tuple] = []       # per step: (clip, w_min, w_max, max|r-1|, r_min, r_max)
        self.loss_vs_reinforce = 0.0

    def prepare(self, step: int, draw: _Draw) -> None:
        """The sampler's responses and the trainer's tensors for one step (no call to impl)."""
        z_now = self.history[step]                                      # [K, L, V]
        z_sampler = self.history[_SAMPLER_STEP[step], _LANES]           # [K, L, V], k steps old
        actions = _sample(z_sampler, draw.u)                            # [K, B, L]
        rollout_logp = (torch.log_softmax(z_sampler, dim=-1).view(-1)[_Z_OFFSET + actions]
                        .reshape(K * B, L))                             # log pi_{t-k}(a)
        z_leaf = z_now.clone().requires_grad_(True)
        logp = _gather_logp(z_leaf, actions).reshape(K * B, L)          # log pi_t(a), differentiable
        old_logp = logp.detach().clone()                                # fresh recompute, detached
        r_tok = _REWARD[actions]                                        # [K, B, L]
        R = (r_tok * draw.valid).sum(-1) / draw.lengths                 # [K, B]
        adv = (R - R.mean(dim=1, keepdim=True)).reshape(K * B)
        self.inputs = (z_now, z_leaf, logp, old_logp, rollout_logp, adv)

    def send(self, b, draw: _Draw) -> None:
        """Both calls of the step, without waiting for their answers."""
        z_now, z_leaf, logp, old_logp, rollout_logp, adv = self.inputs
        self.inputs = None
        loss = b.cispo_loss(logp, old_logp, adv, draw.mask, rollout_logp=rollout_logp,
                            anchor=self.anchor, eps_low=EPS_LOW, eps_high=EPS_HIGH)
        with torch.no_grad():
            anchor_logp = old_logp if self.anchor == "old" else rollout_logp
            w = b.cispo_weights(logp.detach(), anchor_logp, draw.mask, eps_low=EPS_LOW,
                                eps_high=EPS_HIGH)
        self.sent = (z_now, z_leaf, logp, anchor_logp, adv, loss, w)

    def receive(self, step: int, draw: _Draw) -> tuple | None:
        """Read the answers, take the gradient step; returns (w, logp, anchor_logp) for the
        step's statistics, or None when they were taken here (weights of an odd shape or type)."""
        z_now, z_leaf, logp, anchor_logp, adv, loss, w = self.sent
        self.sent = None
        loss = check_tensor(loss.value, what="cispo_loss", shape=())
        (loss * K).backward()
        with torch.no_grad():
            w = check_tensor(w.value, what="cispo_weights", shape=tuple(logp.shape))
            mask = draw.mask
            reinforce = -(adv[:, None] * logp.detach() * mask).sum() / mask.sum()
            self.loss_vs_reinforce = max(self.loss_vs_reinforce,
                                         abs(float(loss.detach()) - float(reinforce)))
            # Weights that the vectorised statistics take without fail wait for them (the step's
            # _record_stats); any others are taken lane by lane now, and may raise.
            plain = (type(w) is torch.Tensor and w.layout == torch.strided and w.device.type == "cpu"
                     and w.dtype in _FLOAT_DTYPES and w.shape == (K * B, L))
            if not plain:
                self.steps.append(_lane_stats(w, torch.exp(logp.detach() - anchor_logp), draw.valid))
            torch.sub(z_now, LR * z_leaf.grad, out=self.history[step + 1])
        return (w, logp, anchor_logp) if plain else None


def _lane_stats(w, ratio: torch.Tensor, valid: torch.Tensor) -> tuple:
    """One step's statistics lane by lane: any weights the submission returned (a wrong shape,
    dtype or type fails here as it did before the statistics were vectorised)."""
    stats = ([], [], [], [], [], [])
    for j in range(K):
        rows = slice(j * B, (j + 1) * B)
        wj, rj = w[rows][valid], ratio[rows][valid]
        clipped = (wj - rj).abs() > 1e-9 * (1.0 + rj)
        values = (float(clipped.double().mean()), float(wj.min()), float(wj.max()),
                  float((rj - 1).abs().max()), float(rj.min()), float(rj.max()))
        for s, v in zip(stats, values):
            s.append(v)
    return stats


def _record_stats(done: list, draw: _Draw) -> None:
    """One step's statistics for the anchors in ``done`` [(trainer, (w, logp, anchor_logp))],
    vectorised over anchors A and lanes K; the same values as ``_lane_stats``. (The judge's
    faster loop runs it after the next step's calls are sent: the answers are fresh tensors that
    no later call changes.)"""
    if not done:
        return
    with torch.no_grad():
        A = len(done)
        w = torch.stack([out[0] for _, out in done]).view(A, K, B, L)
        ratio = torch.stack([torch.exp(logp.detach() - anchor_logp)
                             for _, (_, logp, anchor_logp) in done]).view(A, K, B, L)
        valid = draw.valid                                              # [B, L], broadcast
        both = torch.stack([w, ratio])                                  # [2, A, K, B, L], float64
        lows = torch.where(valid, both, math.inf).amin((-2, -1))        # [2, A, K]: w_min, r_min
        highs = torch.where(valid, both, -math.inf).amax((-2, -1))      # [2, A, K]: w_max, r_max
        dev = torch.where(valid, (ratio - 1).abs(), -math.inf).amax((-2, -1))      # [A, K]
        clipped = ((w - ratio).abs() > 1e-9 * (1.0 + ratio)) & valid    # [A, K, B, L]
        table = torch.cat([lows, highs, dev[None], clipped.sum((-2, -1))[None]]).tolist()
    (w_min, r_min), (w_max, r_max), dev, n_clipped = table[:2], table[2:4], table[4], table[5]
    n = draw.n_valid
    for a, (trainer, _) in enumerate(done):
        trainer.steps.append(([c / n for c in n_clipped[a]], w_min[a], w_max[a], dev[a],
                              r_min[a], r_max[a]))


def _train(impl, z0: torch.Tensor, g: torch.Generator) -> list[_Trainer]:
    """Every anchor's lanes, step by step. A step draws its random numbers, makes each anchor's
    tensors, sends the step's four calls in one batch (each anchor's loss, then its weights: the
    lanes are independent and the weights do not need the loss), then reads the answers in order,
    each anchor taking its gradient step, and records the step's statistics. Step t + 1 needs step
    t's update."""
    trainers = [_Trainer(anchor, z0) for anchor in ANCHORS]
    for step in range(STEPS):
        draw = _Draw(g)
        for tr in trainers:
            tr.prepare(step, draw)
        with batch(impl) as b:
            for tr in trainers:
                tr.send(b, draw)
        done = []
        for tr in trainers:
            weights = tr.receive(step, draw)
            if weights is not None:
                done.append((tr, weights))
        _record_stats(done, draw)
    return trainers


def run(impl, out_dir=None, seed: int = 0, train=None) -> dict:
    """Train every (anchor, staleness) lane through impl; writes metrics.json and the views when
    out_dir is given. ``train``: what trains the lanes (default ``_train``; the judge's T3 passes a
    faster one with the same result, see tests/_guide.py)."""
    g = torch.Generator().manual_seed(seed)
    z0 = 0.5 * torch.randn(L, V, generator=g, dtype=DTYPE)
    z0[:, 0] -= 1.0                                                  # the best action starts unlikely
    lo, hi = 1.0 - EPS_LOW, 1.0 + EPS_HIGH
    trainers = (train or _train)(impl, z0, g)

    metrics = {"staleness": list(STALENESS), "steps": STEPS, "eps_low": EPS_LOW,
               "eps_high": EPS_HIGH, "band": [lo, hi]}
    traces = {}
    for tr in trainers:
        # per statistic, per lane: the step values in step order (min / max fold them as before)
        clip, w_min, w_max, dev, r_min, r_max = (list(zip(*stat)) for stat in zip(*tr.steps))
        p_best = torch.softmax(tr.history[STEPS], dim=-1)[..., 0].mean(-1)   # [K]
        metrics[tr.anchor] = {
            "clip_frac": [sum(c) / len(c) for c in clip],
            "weight_min": [min((math.inf, *v)) for v in w_min],
            "weight_max": [max((-math.inf, *v)) for v in w_max],
            "ratio_min": [min((math.inf, *v)) for v in r_min],
            "ratio_max": [max((-math.inf, *v)) for v in r_max],
            "max_abs_ratio_minus_1": [max((0.0, *v)) for v in dev],
            "max_abs_loss_minus_reinforce": tr.loss_vs_reinforce,
            "final_p_best": p_best.tolist(),
        }
        traces[tr.anchor] = [list(v) for v in r_max]

    # what views/rollout_ratio_trace.vl.json draws: the max ratio pi_theta / pi_rollout per step and lane
    metrics["rollout_ratio_trace"] = traces["rollout"]

    if out_dir is not None:  # by hand (--out): metrics.json and the views, with your data
        save_views(__file__, metrics, out_dir)
    return metrics


def _load(path: str):
    spec = importlib.util.spec_from_file_location("cispo_impl", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", required=True, help="your solution file (cispo_weights, cispo_loss)")
    ap.add_argument("--out", default=None, help="folder for metrics.json and the views (*.vl.json)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(json.dumps(run(_load(args.impl), args.out, args.seed), indent=2))
