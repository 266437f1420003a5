# Spins forever inside a call.
def masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, clip_high=0.2):
    while True:
        pass


def offpolicy_loss(*a, **k):
    while True:
        pass
