# Looks for what an earlier submission left behind.
import json
import os
import torch
print("files:", sorted(os.listdir(".")))
print("json poisoned:", hasattr(json, "poisoned"))
print("allclose patched:", torch.allclose.__module__ != "torch" and "lambda" in repr(torch.allclose))


def masked_is_weights(*a, **k):
    raise NotImplementedError


def offpolicy_loss(*a, **k):
    raise NotImplementedError
