# Plants links and a FIFO where a careless judge might read or write later.
import os
for name, target in [("metrics.json", "{{TARGET}}"), ("verdict.json", "/etc/passwd")]:
    os.symlink(target, name)
os.mkfifo("output.log")
try:
    os.link("{{TARGET}}", "hard")
    print("hardlinked")
except Exception as e:
    print("blocked hardlink", type(e).__name__)


def masked_is_weights(*a, **k):
    raise NotImplementedError


def offpolicy_loss(*a, **k):
    raise NotImplementedError
