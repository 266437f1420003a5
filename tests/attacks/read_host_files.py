# Tries the judge's environment, memory and command line, /etc/shadow, the database, hidden tests.
for path in ["/proc/{{JUDGE_PID}}/environ", "/proc/{{JUDGE_PID}}/mem", "/proc/{{JUDGE_PID}}/cmdline",
             "/etc/shadow", "{{DATABASE}}", "{{REPO}}/exercises/glm5_mis/tests/test_t2_properties.py"]:
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
