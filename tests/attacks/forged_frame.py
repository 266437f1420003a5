# Writes a frame of its own on the job socket (fd 3), at import or inside a call, so the judge
# reads it as the child's reply: {{WHAT}}. The judge must check it against the protocol's one
# schema and end the grading as a malformed (runtime_error) or oversized (memory_limit) answer:
# never crash, never "internal", never build a huge verdict, never leave anything behind.
import json
import os
import struct


def frame(header, payload=b"", head=None):
    head = json.dumps(header).encode() if head is None else head  # NaN and Infinity allowed
    return struct.pack("!II", len(head), len(payload)) + head + payload


FRAME = {{FRAME}}
PHASE = "{{PHASE}}"


def _forge():
    os.write(1, b"forging a frame\n")  # before it: the judge may end the job once it reads it
    view = memoryview(FRAME)
    while view:
        view = view[os.write(3, view):]


if PHASE == "import":
    _forge()


def masked_is_weights(logp, *a, **k):
    if PHASE == "call":
        _forge()
    return logp * 0


def offpolicy_loss(logp, *a, **k):
    if PHASE == "call":
        _forge()
    return (logp * 0).sum()
