"""GRPO: group-relative advantages and the PPO clipped surrogate (reference solution).

Paper: DeepSeekMath, Shao et al. 2024, https://arxiv.org/abs/2402.03300, §4.1 (GRPO),
Eq. 3 (the objective, 1/G Σ_i 1/|o_i| Σ_t min(r A, clip(r) A)) and the outcome-supervision
advantage Â_i = (r_i − mean(r)) / std(r). Clipped surrogate: PPO, Schulman et al. 2017,
https://arxiv.org/abs/1707.06347, Eq. 7. Asymmetric bounds (1 − ε_low, 1 + ε_high) as in DAPO.

Conventions followed here (see spec.md for why):
  * σ is the POPULATION standard deviation (divide by G), as the seed tutorial writes it;
    slime, verl and SkyRL call the unbiased ``torch.std`` (divide by G − 1) instead.
  * ε is added outside the square root: A = (R − mean) / (σ + ε).
  * groups are contiguous slices of ``rewards`` (the layout slime and verl produce).
  * ``per_token_loss=False``: seq-mean-token-mean (slime's default, DeepSeekMath Eq. 3);
    ``per_token_loss=True``: token-mean (slime's ``--calculate-per-token-loss``).
    Empty responses count in B.
"""

from __future__ import annotations

import torch
from torch import Tensor


def group_advantages(rewards: Tensor, group_size: int, eps: float = 1e-6,
                     normalize_std: bool = True) -> Tensor:
    """A_i = (R_i − mean_g) / (σ_g + eps), σ_g the population std of i's group g.

    rewards: [N] float, N = n_groups * group_size, groups are contiguous slices.
    Returns [N] in the dtype of ``rewards``. ``normalize_std=False`` gives R_i − mean_g.
    """
    if not isinstance(rewards, Tensor) or rewards.dim() != 1:
        shape = tuple(getattr(rewards, "shape", ())) or type(rewards).__name__   # a non-tensor: its type
        raise ValueError(f"rewards must be a 1-D tensor [N], got shape {shape}")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size <= 0:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")
    n = rewards.shape[0]
    if n % group_size != 0:
        raise ValueError(f"N = {n} rewards do not split into groups of {group_size}")

    R = rewards.reshape(n // group_size, group_size)          # [n_groups, G]
    mean = R.mean(dim=-1, keepdim=True)                       # [n_groups, 1]
    centred = R - mean                                        # [n_groups, G]
    if normalize_std:
        sigma = centred.square().mean(dim=-1, keepdim=True).sqrt()   # population σ, [n_groups, 1]
        centred = centred / (sigma + eps)
    return centred.reshape(n)                                 # [N]


def _check_shapes(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor) -> None:
    if logp.dim() != 2:
        raise ValueError(f"logp must be [B, L], got shape {tuple(logp.shape)}")
    B, L = logp.shape
    if tuple(old_logp.shape) != (B, L):
        raise ValueError(f"old_logp has shape {tuple(old_logp.shape)}, logp has {(B, L)}")
    if tuple(mask.shape) != (B, L):
        raise ValueError(f"mask has shape {tuple(mask.shape)}, logp has {(B, L)}")
    if tuple(advantages.shape) != (B,):
        raise ValueError(f"advantages must be [B] = {(B,)}, got shape {tuple(advantages.shape)}")


def grpo_loss(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor,
              clip_low: float = 0.2, clip_high: float = 0.2,
              per_token_loss: bool = False) -> Tensor:
    """−J_clip: the clipped surrogate, negated, aggregated over valid tokens.

    logp, old_logp, mask: [B, L]; advantages: [B] (one per response, shared by its tokens).
    r = exp(logp − sg(old_logp)); ℓ = −min(r·sg(A), clip(r, 1−clip_low, 1+clip_high)·sg(A)).
    per_token_loss=False: (1/B) Σ_i Σ_t m ℓ / max(1, n_i); True: Σ m ℓ / max(1, Σ m).
    """
    _check_shapes(logp, old_logp, advantages, mask)
    B, L = logp.shape
    m = mask.bool()                                            # [B, L]
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)

    # neutralise padding (it may hold NaN / ±inf / 1e30) before subtracting or exponentiating
    logp_v = torch.where(m, logp, zero)                        # [B, L]
    old_v = torch.where(m, old_logp.detach(), zero)            # [B, L]
    log_ratio = logp_v - old_v                                 # [B, L], 0 at padding
    A = advantages.detach().to(logp.dtype).unsqueeze(-1)       # [B, 1], frozen

    # Which term the min picks, decided without gradient. Where it picks the clipped term the
    # token's loss is a constant, and its ratio is kept out of the graph: exp's backward at an
    # overflowed ratio (inf) would send 0 * inf = NaN to logp even with a zero upstream gradient.
    ratio_d = torch.exp(log_ratio.detach())                    # r, may be inf or 0
    clipped_d = ratio_d.clamp(1.0 - clip_low, 1.0 + clip_high) * A    # clip(r) A
    picks_clipped = ~(ratio_d * A <= clipped_d)                # a NaN (inf * 0) counts as clipped
    ratio = torch.exp(torch.where(picks_clipped, zero, log_ratio))     # r where the min is r A
    token_loss = torch.where(picks_clipped, -clipped_d, -ratio * A)   # -min(r A, clip(r) A)
    token_loss = torch.where(m, token_loss, zero)              # [B, L], 0 at padding

    n_i = m.sum(dim=-1)                                        # [B] valid tokens per response
    if per_token_loss:
        return token_loss.sum() / n_i.sum().clamp(min=1)       # token-mean
    seq_loss = token_loss.sum(dim=-1) / n_i.clamp(min=1)       # [B] token-mean within a response
    return seq_loss.sum() / max(B, 1)                          # seq-mean, empty responses in B
