# Every call raises an exception of a class made just for it, with a name never seen before (and
# some with names no identifier has: spaces, newlines, 10,000 characters). The judge must report
# them as the submission's exceptions without keeping anything per name.
import itertools

_count = itertools.count()


def _raise():
    n = next(_count)
    name = f"Fresh{n}_" + ("x" * 10_000 if n % 3 == 0 else "") + (" not\nan identifier" if n % 2 else "")
    raise type(name, (Exception,), {})("m" * 50_000)


def masked_is_weights(*a, **k):
    _raise()


def offpolicy_loss(*a, **k):
    _raise()
