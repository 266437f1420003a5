"""Score centering with a top-k sampler head (reference solution).

Source: "Score Centering Stabilizes Off-policy Reinforcement Learning", as implemented in slime
(`slime/utils/score_centering.py::score_centering_correction`, Eqs. (9), (12), (14)); the
derivation follows the tutorial's section "SC" (seed 001).

For one prefix, with trainer p, sampler q, a token-wise IS rule w_v = f(p_v / q_v) and the
sampler's recorded top-k head H (full-vocabulary-normalised log-probs, never renormalised):

    P_H = sum_H p_v,   Q_H = sum_H q_v,
    rho = max(1 - Q_H, eps) / max(1 - P_H, eps),        # tail model: q_hat_v = rho * p_v off H
    alpha' = rho * f(1 / rho),                            # q_hat_v * f(p_v / q_hat_v) off H
    c = sum_H sg(q_v f(p_v / q_v) - alpha' p_v) * log p_v

so that grad c = mu_w = sum_v q_hat_v f(p_v / q_hat_v) grad log p_v (the weighted mean score
under the reconstructed sampler distribution). The policy loss adds A * c to the REINFORCE
token loss -A * w_a * log p_a and takes the token-mean, so -grad l = A (w_a s_a - mu_w).
"""

import math

import torch

MODES = ("none", "tis", "mis")


def _check_mode(mode, low, high):
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    if mode != "none":
        if not (math.isfinite(low) and math.isfinite(high) and 0.0 <= low <= high and high > 0.0):
            raise ValueError(f"IS bounds need finite 0 <= low <= high and high > 0, got low={low}, high={high}")


def _f(x, mode, low, high):
    """The token-wise IS rule f applied to ratios x (already detached)."""
    if mode == "none":
        return torch.ones_like(x)
    if mode == "tis":
        return x.clamp(low, high)
    # mis (IcePop / slime "mis"): keep the ratio on the closed band, zero it elsewhere.
    keep = (x >= low) & (x <= high)
    return torch.where(keep, x, torch.zeros_like(x))


def _correction(train_head_logp, sampler_head_logp, mode, low, high, eps):
    log_p = train_head_logp.detach()                           # [..., k], sg
    log_q = sampler_head_logp.detach()                         # [..., k], sg
    p, q = log_p.exp(), log_q.exp()
    p_mass, q_mass = p.sum(-1), q.sum(-1)                      # P_H, Q_H: [...]
    rho = (1 - q_mass).clamp_min(eps) / (1 - p_mass).clamp_min(eps)
    alpha = rho * _f(rho.reciprocal(), mode, low, high)        # alpha' = rho f(1/rho)
    w = _f((log_p - log_q).exp(), mode, low, high)             # f(p_v / q_v): [..., k]
    residual = q * w - alpha.unsqueeze(-1) * p                 # [..., k], no gradient
    return (residual * train_head_logp).sum(-1)                # [...], grad only via log p_v


def sc_correction(train_head_logp, sampler_head_logp, mode="none", low=0.0, high=2.0, eps=1e-6):
    """Head-only score-centering correction c per position.

    train_head_logp:   [..., k] trainer log-probs of the sampler's head tokens (full-vocab normalised)
    sampler_head_logp: [..., k] sampler log-probs of the same tokens (frozen)
    returns:           [...]    c = sum_H sg(q w - alpha' p) log p
    """
    _check_mode(mode, low, high)
    if train_head_logp.dim() < 1 or train_head_logp.shape != sampler_head_logp.shape:
        raise ValueError(f"head log-probs must share a shape [..., k], got {tuple(train_head_logp.shape)} "
                         f"and {tuple(sampler_head_logp.shape)}")
    return _correction(train_head_logp, sampler_head_logp, mode, low, high, eps)


def sc_policy_loss(logp, rollout_logp, train_head_logp, sampler_head_logp, advantages, mask,
                   mode="none", low=0.0, high=2.0, eps=1e-6):
    """REINFORCE with IS weight and score centering, token-mean over valid tokens.

    logp, rollout_logp, mask:            [B, L]
    train_head_logp, sampler_head_logp:  [B, L, k]
    advantages:                          [B]
    loss = sum m * (-A * w_a * logp + A * c) / max(1, sum m),  w_a = f(exp(sg(logp) - rollout_logp))
    """
    _check_mode(mode, low, high)
    if logp.dim() != 2 or rollout_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"logp, rollout_logp and mask must share a shape [B, L], got {tuple(logp.shape)}, "
                         f"{tuple(rollout_logp.shape)}, {tuple(mask.shape)}")
    B, L = logp.shape
    if advantages.shape != (B,):
        raise ValueError(f"advantages must have shape [B] = ({B},), got {tuple(advantages.shape)}")
    if (train_head_logp.dim() != 3 or train_head_logp.shape[:2] != (B, L)
            or sampler_head_logp.shape != train_head_logp.shape):
        raise ValueError(f"head log-probs must both have shape [B, L, k] = ({B}, {L}, k), got "
                         f"{tuple(train_head_logp.shape)} and {tuple(sampler_head_logp.shape)}")

    m = mask.bool()                                                        # [B, L]
    m3 = m.unsqueeze(-1)                                                   # [B, L, 1]
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)
    # Neutralise padding before any arithmetic (NaN * 0 is NaN): a padded token then has
    # logp = 0 and an all-zero head, so its loss term is exactly 0 and so is its gradient.
    logp_v = torch.where(m, logp, zero)
    rollout_v = torch.where(m, rollout_logp, zero)
    train_head = torch.where(m3, train_head_logp, zero)                    # [B, L, k]
    sampler_head = torch.where(m3, sampler_head_logp, zero)

    w_a = _f((logp_v - rollout_v).detach().exp(), mode, low, high)         # [B, L], sg
    c = _correction(train_head, sampler_head, mode, low, high, eps)         # [B, L]
    A = advantages.detach().to(logp.dtype).unsqueeze(-1)                    # [B, 1], logp's dtype
    per_token = -A * w_a * logp_v + A * c                                   # [B, L]
    return per_token.sum() / m.sum().clamp_min(1).to(logp.dtype)
