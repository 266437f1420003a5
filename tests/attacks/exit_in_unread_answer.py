# The one call the test leaves unread ends the process ({{HOW}}): the judge reads that answer
# only after the tests, while it cleans up, and must still end the job and return a verdict.
import os
import sys
import time


def f(x):
    if "{{HOW}}" == "exit":
        sys.exit(0)
    if "{{HOW}}" == "os_exit":
        os._exit(0)
    if "{{HOW}}" == "interrupt":
        raise KeyboardInterrupt
    time.sleep(3600)
