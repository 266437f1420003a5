# Connects to a TCP listener on the host's loopback.
import socket
s = socket.create_connection(("127.0.0.1", {{PORT}}), timeout=1)
s.sendall(b"hello")
