# CORRECT: masked_fill copies, float64 mask arithmetic cast back, clamp_ on a fresh tensor.
import torch


def _check(ts, names):
    s = ts[0].shape
    if len(s) != 2 or any(t.shape != s for t in ts):
        raise ValueError("shapes " + ", ".join(f"{n}={tuple(t.shape)}" for n, t in zip(names, ts)))


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    if eps_low < 0 or eps_high <= 0:
        raise ValueError("eps")
    _check([logp, anchor_logp, mask], ["logp", "anchor_logp", "mask"])
    pad = mask == 0
    d = logp.detach().masked_fill(pad, 0) - anchor_logp.detach().to(logp.dtype).masked_fill(pad, 0)
    w = d.exp()
    w.clamp_(min=1 - eps_low, max=1 + eps_high)
    return w.masked_fill_(pad, 0)


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old",
               eps_low=1.0, eps_high=4.0, tis_enabled=False):
    if anchor not in {"old", "rollout"}:
        raise ValueError("anchor")
    if anchor == "rollout":
        if rollout_logp is None:
            raise ValueError("rollout anchor without rollout_logp")
        if tis_enabled:
            raise ValueError("TIS + rollout anchor")
    if tis_enabled and rollout_logp is None:
        raise ValueError("TIS without rollout_logp")
    ts = [logp, old_logp, mask] + ([rollout_logp] if rollout_logp is not None else [])
    _check(ts, ["logp", "old_logp", "mask", "rollout_logp"])
    if advantages.shape != (logp.shape[0],):
        raise ValueError("advantages")
    w = cispo_weights(logp, rollout_logp if anchor == "rollout" else old_logp, mask, eps_low, eps_high)
    pad = mask == 0
    coef = w * advantages.detach().to(logp.dtype).unsqueeze(-1)
    if tis_enabled:
        d = old_logp.detach().to(logp.dtype).masked_fill(pad, 0) - rollout_logp.detach().to(logp.dtype).masked_fill(pad, 0)
        coef = coef * d.exp().clamp(0, 2).masked_fill(pad, 0)
    contrib = (coef * logp.masked_fill(pad, 0)).masked_fill(pad, 0)
    N = (~pad).sum().item()
    return -contrib.sum() / max(N, 1)
