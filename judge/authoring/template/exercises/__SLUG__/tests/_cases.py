"""Input builders shared by the __SLUG__ tier tests (loaded with ``sibling(__file__, "_cases")``)."""

import math

import torch

# What padded positions hold in the tests: never read them, never multiply them by 0.
FILLS = (math.nan, math.inf, 1e30, -math.inf)


def random_batch(g: torch.Generator, B: int, L: int, dtype: torch.dtype, *, fill: float = math.nan,
                 empty_row: int | None = None, single_row: int | None = None, float_mask: bool = False):
    """(x, mask): random values, about 70% valid, padding filled with ``fill``; ``empty_row`` has
    no valid entry and ``single_row`` exactly one."""
    x = torch.randn(B, L, generator=g, dtype=torch.float64) * 2.0 + 0.5
    mask = torch.rand(B, L, generator=g) < 0.7
    if empty_row is not None:
        mask[empty_row] = False
    if single_row is not None:
        mask[single_row] = False
        mask[single_row, L - 1] = True
    x = x.masked_fill(~mask, fill).to(dtype)
    return x, (mask.to(dtype) if float_mask else mask)
