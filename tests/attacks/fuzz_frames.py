# Writes raw bytes of the fuzzer's choosing (frames, half frames, lies about lengths) on the job
# socket (fd 3) before the import ends (AT = 0) or at the start of call number AT, then computes
# the honest answer: f(x) = 2 x.
import os

FRAME = bytes.fromhex("{{FRAME_HEX}}")
AT = {{AT}}
_calls = [0]


def _forge():
    view = memoryview(FRAME)
    try:
        while view:
            view = view[os.write(3, view):]
    except OSError:  # the judge hung up: it has seen enough
        pass


if AT == 0:
    _forge()


def f(x):
    _calls[0] += 1
    if _calls[0] == AT:
        _forge()
    return x * 2
