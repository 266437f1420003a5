# Inside a call, answers for itself on the job socket: the start of a frame (its length prefix
# and a few header bytes), then nothing more. The judge must not wait past the call's limit.
import os
import struct
import time


def masked_is_weights(*a, **k):
    os.write(3, struct.pack("!II", 100, 0) + b'{"ok": tr')
    time.sleep(3600)


def offpolicy_loss(*a, **k):
    masked_is_weights()
