# Returns numpy arrays and Python floats.
def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    return (logp.detach() * 0).numpy()


def offpolicy_loss(logp, rollout_logp, advantages, mask, clip_low=0.2, clip_high=0.2):
    return 0.0
