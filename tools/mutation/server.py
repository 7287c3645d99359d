"""Fork server for the mutation run: pays PyMC's import once, then runs each mutant's tests in a
forked child that imports ``pymc_unbounded_dp`` afresh (from the mutated files on disk).

Usage: ``python server.py ROOT SOCKET LOG TIMEOUT`` (started by ``run.sh``). A client sends the
pytest arguments (NUL-separated); the server answers with the child's exit code (0 = the tests
passed: the mutant survived). A child that exceeds ``TIMEOUT`` seconds is killed and reported as
exit code 124 (killed mutant: a mutant that hangs the kernels is caught). The first request (the
baseline, which compiles PyTensor's C code into an empty cache) gets at least ``FIRST_TIMEOUT``
seconds. ``STOP`` ends the server.
"""

import os
import signal
import socket
import sys
import time

root, sock_path, log_path, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
FIRST_TIMEOUT = 900.0
sys.path[:0] = [root, os.path.join(root, "tests")]
os.chdir(root)

import arviz  # noqa: E402,F401
import numba  # noqa: E402,F401
import numpy  # noqa: E402,F401
import pymc  # noqa: E402,F401
import pytensor  # noqa: E402,F401
import pytest  # noqa: E402
import scipy.stats  # noqa: E402,F401

assert "pymc_unbounded_dp" not in sys.modules

if os.path.exists(sock_path):
    os.unlink(sock_path)
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sock_path)
server.listen(1)
print("ready", flush=True)
limit = max(timeout, FIRST_TIMEOUT)  # for the first request; then ``timeout``

while True:
    conn, _ = server.accept()
    request = b""
    while chunk := conn.recv(1 << 16):
        request += chunk
    request = request.decode()
    if request == "STOP":
        conn.close()
        break
    args = request.split("\0")
    pid = os.fork()
    if pid == 0:  # child
        server.close()
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        import pymc_unbounded_dp

        assert pymc_unbounded_dp.__file__.startswith(root), pymc_unbounded_dp.__file__
        code = pytest.main(args)
        sys.stdout.flush()
        os._exit(int(code))
    start = time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() - start > limit:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            code = 124
            break
        time.sleep(0.05)
    limit = timeout
    try:
        conn.sendall(str(code).encode())
    except BrokenPipeError:  # the client is gone (cosmic-ray's own timeout killed it): serve on
        pass
    conn.close()
server.close()
os.unlink(sock_path)
