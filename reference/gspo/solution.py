"""GSPO: Group Sequence Policy Optimization (Zheng et al., 2025), the sequence-level loss.

Paper: https://arxiv.org/abs/2507.18071, §4.1 (Eqs. 6-8: the objective and the sequence-level
importance ratio) and §4.2 (Eq. 11: every token of a response gets the same gradient weight).

    s_i(θ) = ( π_θ(y_i|x) / π_θold(y_i|x) )^(1/|y_i|)
           = exp( (1/|y_i|) Σ_t log π_θ(y_i,t|x, y_i,<t) − log π_θold(y_i,t|x, y_i,<t) )

    J(θ) = (1/B) Σ_i 1[|y_i| > 0] · min( s_i(θ) Â_i, clip(s_i(θ), 1−ε, 1+ε) Â_i ),   loss = −J

This is GSPO (one ratio, one clip, one advantage per response), not GSPO-token (§4.3). Padding is
neutralised with ``torch.where`` before the subtraction; ``old_logp`` and ``advantages`` are
stop-gradient; ``s`` keeps its graph to ``logp``.
"""

import torch


def _check_shapes(logp, old_logp, mask, advantages=None):
    if logp.dim() != 2:
        raise ValueError(f"logp must be 2-D [B, L], got shape {tuple(logp.shape)}")
    if tuple(old_logp.shape) != tuple(logp.shape):
        raise ValueError(f"old_logp has shape {tuple(old_logp.shape)}, expected logp's {tuple(logp.shape)}")
    if tuple(mask.shape) != tuple(logp.shape):
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected logp's {tuple(logp.shape)}")
    if advantages is not None and tuple(advantages.shape) != (logp.shape[0],):
        raise ValueError(f"advantages has shape {tuple(advantages.shape)}, expected ({logp.shape[0]},) "
                         f"for logp of shape {tuple(logp.shape)}")


def _seq_log_ratio(logp, old_logp, mask):
    valid = mask.bool()                                            # [B, L]
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)
    logp_v = torch.where(valid, logp, zero)                        # [B, L] padding -> 0, grad 0
    old_v = torch.where(valid, old_logp.detach(), zero)            # [B, L] sg(π_old)
    n = valid.sum(dim=-1).to(logp.dtype)                           # [B]    |y_i|
    log_s = (logp_v - old_v).sum(dim=-1) / n.clamp(min=1)          # [B]    0 when |y_i| = 0
    return log_s, n


def sequence_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sequence-level importance ratio s_i (Eq. 7): the geometric mean of valid-token ratios.

    logp, old_logp, mask: [B, L]. Returns s: [B], in logp's dtype, differentiable w.r.t. logp;
    an empty response (no valid token) has s = 1.
    """
    _check_shapes(logp, old_logp, mask)
    log_s, _ = _seq_log_ratio(logp, old_logp, mask)
    return torch.exp(log_s)                                        # [B]


def gspo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, clip_eps: float = 0.2) -> torch.Tensor:
    """Negative GSPO objective (Eq. 6), averaged over all B responses (empty ones add 0).

    logp, old_logp, mask: [B, L]; advantages: [B] (one Â_i per response, stop-gradient).
    Returns a scalar loss of shape (), in logp's dtype, with gradients to logp only.
    """
    _check_shapes(logp, old_logp, mask, advantages)
    log_s, n = _seq_log_ratio(logp, old_logp, mask)
    adv = advantages.detach().to(logp.dtype)                       # [B]    sg(Â_i)
    # Which term the min picks, decided without gradient. Where it picks the clipped term the
    # response's objective is a constant and s stays out of the graph: exp's backward at an
    # overflowed s (inf) would send 0 * inf = NaN to logp even with a zero upstream gradient.
    s_d = torch.exp(log_s.detach())                                # [B]    may be inf or 0
    clipped_d = s_d.clamp(1.0 - clip_eps, 1.0 + clip_eps) * adv    # [B]    clip(s) Â
    picks_clipped = ~(s_d * adv <= clipped_d)                      # [B]    NaN (inf * 0): clipped
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)
    s = torch.exp(torch.where(picks_clipped, zero, log_s))         # [B]    s where the min is s Â
    per_seq = torch.where(picks_clipped, clipped_d, s * adv)       # [B]    min(s Â, clip(s) Â)
    per_seq = torch.where(n > 0, per_seq, torch.zeros_like(per_seq))  # empty responses add 0
    batch = max(logp.shape[0], 1)                                  # empty responses count in B
    return -per_seq.sum() / batch                                  # []
