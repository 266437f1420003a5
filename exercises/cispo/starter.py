"""CISPO: clipped IS-weight policy optimisation, with an anchor (see spec.md).

MiniMax-M1, arXiv 2506.13585, Section 3.1, Eqs. 4-5; anchor choice from SkyRL PR #1859.
Shapes: B responses, L token positions. `mask` is bool or 0/1 float; padded positions (mask 0)
may hold NaN, +-inf or 1e30 in every [B, L] input.
"""

import torch


def cispo_weights(logp: torch.Tensor, anchor_logp: torch.Tensor, mask: torch.Tensor,
                  eps_low: float = 1.0, eps_high: float = 4.0) -> torch.Tensor:
    """The clipped importance-sampling weights of CISPO (MiniMax-M1 Eq. 5).

        r     = exp(logp - anchor_logp)
        r_hat = sg(clip(r, 1 - eps_low, 1 + eps_high))

    Args:
        logp:        [B, L] current log-probs log pi_theta of the sampled tokens.
        anchor_logp: [B, L] log-probs of the anchor policy (pi_old or pi_rollout).
        mask:        [B, L] bool or 0/1 float; 0 marks padding.
        eps_low:     >= 0; the lower bound is 1 - eps_low (the default 1.0 means no lower bound).
        eps_high:    > 0; the upper bound is 1 + eps_high.

    Returns:
        [B, L] tensor in logp's dtype, detached (no autograd history), 0 at padded positions.
        A log-ratio of +1000 gives 1 + eps_high (not NaN), -1000 gives 1 - eps_low.

    Raises:
        ValueError: eps_low < 0, eps_high <= 0, or shapes that are not the same [B, L].
    """
    raise NotImplementedError("cispo_weights is not implemented yet")


def cispo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
               mask: torch.Tensor, rollout_logp: torch.Tensor | None = None, anchor: str = "old",
               eps_low: float = 1.0, eps_high: float = 4.0, tis_enabled: bool = False) -> torch.Tensor:
    """The token-mean CISPO loss (MiniMax-M1 Eq. 4, negated for minimisation).

        loss = - sum_{b,t} m * r_hat * tis * sg(A_b) * logp / max(1, sum m)

    with r_hat = cispo_weights(logp, anchor_logp, mask, eps_low, eps_high), where anchor_logp is
    old_logp (anchor="old") or rollout_logp (anchor="rollout"), and tis = 1 unless tis_enabled,
    in which case tis = sg(clamp(exp(old_logp - rollout_logp), 0, 2)).

    Args:
        logp:         [B, L] log pi_theta (the only input that receives a gradient).
        old_logp:     [B, L] log pi_old, recomputed by the trainer before the update.
        advantages:   [B] one advantage per response, broadcast over its tokens.
        mask:         [B, L] bool or 0/1 float.
        rollout_logp: [B, L] or None; the sampler's log-probs log pi_rollout.
        anchor:       "old" or "rollout".
        eps_low, eps_high: as in cispo_weights.
        tis_enabled:  multiply each token's loss by the detached TIS weight (anchor "old" only).

    Returns:
        a scalar tensor (shape ()) in logp's dtype; with an empty mask a zero that is still
        connected to logp's graph.

    Raises:
        ValueError: unknown anchor; anchor "rollout" without rollout_logp; anchor "rollout" with
        tis_enabled=True; tis_enabled=True without rollout_logp; eps_low < 0 or eps_high <= 0;
        mismatched shapes (advantages must be [B], not [B, 1]).
    """
    raise NotImplementedError("cispo_loss is not implemented yet")
