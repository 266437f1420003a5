# gspo: the reference, except that the T3 toy's sequence_ratio (3 responses of 2 tokens) gets an
# answer of shape {{SHAPE}}: the judge must check an answer's shape before it converts or copies
# anything of it, and say what was wrong, not crash.
{{REFERENCE}}
import torch
_good_ratio = sequence_ratio


def sequence_ratio(logp, old_logp, mask):
    if tuple(logp.shape) == (3, 2) and logp.dtype == torch.float64 and float(logp[0, 0]) == -1.0 + 0.6931471805599453:
        return torch.ones({{SHAPE}}, dtype=logp.dtype)
    return _good_ratio(logp, old_logp, mask)
