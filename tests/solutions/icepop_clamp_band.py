"""CORRECT: icepop band tested as clamp(rho, low, high) == rho, einsum reductions, the A > 0 and A <= 0 branches written separately."""
import math
import torch


def icepop_weights(old_logp, rollout_logp, mask, low=0.5, high=2.0):
    for t in (old_logp, rollout_logp, mask):
        if t.dim() != 2:
            raise ValueError
    if not (old_logp.shape == rollout_logp.shape == mask.shape):
        raise ValueError
    if not (0 <= low <= high and 0 < high < math.inf):
        raise ValueError
    v = mask.to(torch.bool)
    z = torch.zeros((), dtype=old_logp.dtype)
    d = torch.where(v, old_logp.detach(), z) - torch.where(v, rollout_logp.detach(), z)
    rho = torch.exp(d)
    inband = torch.clamp(rho, low, high) == rho
    return torch.where(v & inband, rho, z)


def icepop_ppo_loss(logp, old_logp, rollout_logp, advantages, mask, eps_low=0.2, eps_high=0.2,
                    low=0.5, high=2.0, per_token_loss=True):
    w = icepop_weights(old_logp, rollout_logp, mask, low, high)
    if logp.dim() != 2 or logp.shape != old_logp.shape:
        raise ValueError
    B, L = logp.shape
    if advantages.dim() != 1 or advantages.numel() != B:
        raise ValueError
    v = mask.to(torch.bool)
    dt = logp.dtype
    z = torch.zeros((), dtype=dt)
    A = advantages.detach().to(dt)
    Ab = A.view(B, 1).expand(B, L)
    lr = torch.where(v, logp, z) - torch.where(v, old_logp.detach(), z)
    # A>0: loss = -A * min(r, 1+eh); A<=0: loss = -A * max(r, 1-el)
    lr_pos = torch.minimum(lr, torch.full_like(lr, math.log1p(eps_high)).detach()) if eps_high > -1 else lr
    r_pos = torch.exp(lr_pos)
    pos_loss = -Ab * torch.where(lr.detach() > math.log1p(eps_high) if eps_high > -1 else torch.ones_like(v),
                                 torch.full_like(lr, 1 + eps_high), torch.minimum(r_pos, torch.full_like(lr, 1 + eps_high)))
    lr_neg = torch.where(Ab > 0, z, lr)
    r_neg = torch.exp(lr_neg)
    neg_loss = -Ab * torch.maximum(r_neg, torch.full_like(lr, 1 - eps_low))
    ell = torch.where(Ab > 0, pos_loss, neg_loss)
    tok = torch.where(v, w * ell, z)
    m = v.to(dt)
    if per_token_loss:
        return torch.einsum("bl,bl->", tok, torch.ones_like(tok)) / m.sum().clamp(min=1)
    per = torch.einsum("bl->b", tok) / torch.einsum("bl->b", m).clamp(min=1)
    return torch.einsum("b->", per) / max(B, 1)
