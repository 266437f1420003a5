"""Divides by the row length L instead of the number of valid entries.

expect: T1
"""

import torch


def masked_mean(x, mask):
    if x.dim() != 2 or tuple(mask.shape) != tuple(x.shape):
        raise ValueError(f"bad shapes {tuple(x.shape)}, {tuple(mask.shape)}")
    valid = mask.bool()
    total = torch.where(valid, x, torch.zeros((), dtype=x.dtype)).sum(dim=-1)
    return total / x.shape[-1]
