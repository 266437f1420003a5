"""__TITLE__: the vectorised reference.

    mean_b = sum_t m_bt x_bt / max(n_b, 1),   n_b = sum_t m_bt   (0 for an empty row)
"""

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of each row's valid entries. x, mask: [B, L]; returns [B] in x's dtype."""
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [B, L], got shape {tuple(x.shape)}")
    if tuple(mask.shape) != tuple(x.shape):
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected x's {tuple(x.shape)}")
    valid = mask.bool()                                                  # [B, L]
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    total = torch.where(valid, x, zero).sum(dim=-1)                      # [B]  padding never read
    count = valid.sum(dim=-1).clamp(min=1).to(x.dtype)                   # [B]  max(n_b, 1)
    return total / count
