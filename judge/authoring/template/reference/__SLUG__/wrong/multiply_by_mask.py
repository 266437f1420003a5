"""Multiplies by the mask instead of selecting: NaN or inf padding becomes NaN (NaN * 0 = NaN).

expect: T1
"""


def masked_mean(x, mask):
    if x.dim() != 2 or tuple(mask.shape) != tuple(x.shape):
        raise ValueError(f"bad shapes {tuple(x.shape)}, {tuple(mask.shape)}")
    m = mask.to(x.dtype)
    return (x * m).sum(dim=-1) / m.sum(dim=-1).clamp(min=1)
