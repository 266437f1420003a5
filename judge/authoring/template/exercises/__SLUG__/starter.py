"""__TITLE__.

Read spec.md for the full contract. Shapes: B rows, L positions.
"""

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of each row's valid entries: sum_t m_bt x_bt / max(n_b, 1), n_b = sum_t m_bt.

    Args:
        x:    [B, L] values (gets gradients).
        mask: [B, L] bool or 0/1 float; 1 marks a valid entry, 0 padding (which may hold NaN,
              inf or 1e30: never read it, never multiply it by 0).

    Returns:
        [B], x's dtype, differentiable w.r.t. x; 0 for a row with no valid entry.

    Raises:
        ValueError: unless x is 2-D and mask has exactly its shape.
    """
    raise NotImplementedError("masked_mean is not implemented yet")
