# Correct values, but the weights call switches off requires_grad on a logp that asked for
# gradients (and switches it on for rollout_logp): the caller's autograd would see other leaves
# than it made. An input's requires_grad is the caller's: a flip is reported.
{{REFERENCE}}
import torch
_good_weights = masked_is_weights


def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    w = _good_weights(logp, rollout_logp, mask, clip_low, clip_high)
    if logp.requires_grad:
        logp.requires_grad_(False)
    if rollout_logp.is_floating_point() and not rollout_logp.requires_grad:
        rollout_logp.requires_grad_(True)
    return w.detach()
