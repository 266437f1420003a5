# Leaves state behind for the next submission: files in its dir, /tmp, /dev/shm, patched modules.
import json
import os
import torch
json.poisoned = True
torch.allclose = lambda *a, **k: True
with open("left-behind.txt", "w") as f:
    f.write("{{NONCE}}")
for path in ["/tmp/{{NONCE}}", "/dev/shm/{{NONCE}}"]:
    try:
        open(path, "w").write("x")
        print("wrote", path)
    except Exception as e:
        print("blocked", path, type(e).__name__)


def masked_is_weights(*a, **k):
    raise NotImplementedError


def offpolicy_loss(*a, **k):
    raise NotImplementedError
