# Sends UDP to the host's loopback and tries a DNS lookup.
import socket
for what in ("udp", "dns"):
    try:
        if what == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"hi", ("127.0.0.1", 53))
        else:
            socket.getaddrinfo("example.com", 80)
        print("reached", what)
    except Exception as e:
        print("blocked", what, type(e).__name__)


def masked_is_weights(*a, **k):
    raise NotImplementedError


def offpolicy_loss(*a, **k):
    raise NotImplementedError
