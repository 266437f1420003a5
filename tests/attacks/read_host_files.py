# Tries the judge's environment, memory, the database and /etc/shadow.
for path in ["/proc/{{JUDGE_PID}}/environ", "/proc/{{JUDGE_PID}}/mem", "/etc/shadow",
             "{{REPO}}/judge.db"]:
    try:
        with open(path, "rb") as f:
            f.read(16)
        print("leaked", path)
    except Exception as e:
        print("blocked", path, type(e).__name__)


def masked_is_weights(*a, **k):
    raise NotImplementedError


def offpolicy_loss(*a, **k):
    raise NotImplementedError
