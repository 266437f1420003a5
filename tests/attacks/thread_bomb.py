# Asks torch for 1024 threads and starts thousands of Python threads.
import threading
import time
import torch
torch.set_num_threads(1024)
started = 0
try:
    for _ in range(5000):
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        started += 1
finally:
    print("threads started:", started)
