"""CORRECT: explicit Python loops over rows and tokens with math.exp-free torch scalars, float64 inside."""
import torch


def _check(eps_low, eps_high, *ts):
    if eps_low < 0 or eps_high <= 0:
        raise ValueError("eps")
    ref = ts[0]
    if not isinstance(ref, torch.Tensor) or ref.ndim != 2:
        raise ValueError("logp must be [B, L]")
    for t in ts[1:]:
        if not isinstance(t, torch.Tensor) or t.shape != ref.shape:
            raise ValueError(f"shape {getattr(t, 'shape', None)} vs {ref.shape}")


def cispo_weights(logp, anchor_logp, mask, eps_low=1.0, eps_high=4.0):
    _check(eps_low, eps_high, logp, anchor_logp, mask)
    B, L = logp.shape
    out = torch.zeros(B, L, dtype=torch.float64)
    lp, an, m = logp.detach().double(), anchor_logp.detach().double(), mask.bool()
    lo, hi = 1.0 - eps_low, 1.0 + eps_high
    for b in range(B):
        for t in range(L):
            if m[b, t]:
                r = torch.exp(lp[b, t] - an[b, t]) if logp.dtype == torch.float64 else \
                    torch.exp((logp[b, t] - anchor_logp[b, t]).detach()).double()
                out[b, t] = min(max(float(r), lo), hi)
    return out.to(logp.dtype)


def cispo_loss(logp, old_logp, advantages, mask, rollout_logp=None, anchor="old",
               eps_low=1.0, eps_high=4.0, tis_enabled=False):
    if anchor not in ("old", "rollout"):
        raise ValueError("anchor")
    if anchor == "rollout":
        if rollout_logp is None:
            raise ValueError("rollout_logp required")
        if tis_enabled:
            raise ValueError("tis with rollout anchor")
    if tis_enabled and rollout_logp is None:
        raise ValueError("tis needs rollout_logp")
    extra = (rollout_logp,) if rollout_logp is not None else ()
    _check(eps_low, eps_high, logp, old_logp, mask, *extra)
    if not isinstance(advantages, torch.Tensor) or tuple(advantages.shape) != (logp.shape[0],):
        raise ValueError("advantages must be [B]")
    w = cispo_weights(logp, old_logp if anchor == "old" else rollout_logp, mask, eps_low, eps_high)
    m = mask.bool()
    B, L = logp.shape
    total = torch.zeros((), dtype=logp.dtype) + logp.sum() * 0 if False else None
    terms = []
    count = 0
    for b in range(B):
        a = float(advantages[b])
        for t in range(L):
            if m[b, t]:
                coef = float(w[b, t]) * a
                if tis_enabled:
                    d = float(old_logp[b, t].double() - rollout_logp[b, t].double()) if logp.dtype == torch.float64 \
                        else float(old_logp[b, t].detach() - rollout_logp[b, t].detach())
                    tau = torch.exp(torch.tensor(d, dtype=logp.dtype)).clamp(0, 2)
                    coef = float(w[b, t].double() * tau.double()) * a
                terms.append(logp[b, t] * coef)
                count += 1
    if not terms:
        return torch.where(m, logp, torch.zeros((), dtype=logp.dtype)).sum() * 0.0
    s = terms[0]
    for x in terms[1:]:
        s = s + x
    return (-s / max(1, count)).to(logp.dtype)
