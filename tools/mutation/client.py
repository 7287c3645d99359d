"""cosmic-ray's test command: ask the fork server (``server.py``) to run the tests, exit with
their exit code. Usage: ``python client.py SOCKET pytest-args...``.

Waits (up to 10 min) for the server's socket: a test command that cannot reach the server must
not count as a killed mutant. If it never can, exit 125 and say so (run.sh checks the log)."""

import socket
import sys
import time

deadline = time.monotonic() + 600
while True:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(sys.argv[1])
        break
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        if time.monotonic() > deadline:
            print("client.py: no mutation server at", sys.argv[1], file=sys.stderr)
            sys.exit(125)
        time.sleep(0.5)
sock.sendall("\0".join(sys.argv[2:]).encode() if len(sys.argv) > 2 else b"")
sock.shutdown(socket.SHUT_WR)
reply = b""
while chunk := sock.recv(64):
    reply += chunk
sys.exit(int(reply.decode()) if reply else 1)
