# Raises KeyboardInterrupt mid-test.
def masked_is_weights(*a, **k):
    raise KeyboardInterrupt


def offpolicy_loss(*a, **k):
    raise KeyboardInterrupt
