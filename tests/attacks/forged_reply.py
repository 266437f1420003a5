# Inside a call, answers for itself on the job socket: a whole frame whose tensor node points
# past the frame's tensor table (and one whose bytes disagree with its shape). The judge must
# end the grading as a malformed reply, not crash or read memory it was not sent.
import json
import os
import struct


def _forge(node):
    os.write(1, b"forged a reply\n")  # before the frame: the judge ends the job once it reads it
    head = json.dumps({"ok": True, "handle": 0, "result": node, "nb": [8]}).encode()
    os.write(3, struct.pack("!II", len(head), 8) + head + b"\0" * 8)


def masked_is_weights(*a, **k):
    _forge({"T": 5, "dtype": "float64", "shape": [1]})
    return a[0]


def offpolicy_loss(*a, **k):
    _forge({"T": 0, "dtype": "float64", "shape": [4]})
    return a[0].sum()
