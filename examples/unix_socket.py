"""A Unix socket: hand an efd object to an unrelated process.

efd.send_handle(sock, obj) sends the object's handle with its descriptors
attached (SCM_RIGHTS); efd.recv_handle(sock) in the other process rebuilds
it.  The receiver needs no common ancestor with the sender: here the
"client" is a separate program that inherits nothing and finds the server
by the socket's path.

The server hands out a BoundedSemaphore that limits how many clients may
use a resource at once; the client takes a unit, and gives it back.

Run:  python examples/unix_socket.py
"""
import os
import socket
import subprocess
import sys
import tempfile

import efd

CLIENT = """
import socket, sys, efd

with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
    s.connect(sys.argv[1])
    limit = efd.recv_handle(s)
print(f"client: got a {type(limit).__name__} ({limit.backend} backend)",
      flush=True)
with limit:                       # one of the server's units
    print("client: holding a unit", flush=True)
limit.close()
"""


def main():
    limit = efd.BoundedSemaphore(2)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "server.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(path)
            server.listen(1)
            client = subprocess.Popen([sys.executable, "-c", CLIENT, path])
            server.settimeout(60)
            conn, _ = server.accept()
            with conn:
                efd.send_handle(conn, limit)
            client.wait(timeout=60)
    # The client gave its unit back: both are here again.
    units = sum(limit.acquire(timeout=5) for _ in range(2))
    print(f"server: client exit code {client.returncode}, {units} units back")
    limit.close()


if __name__ == "__main__":
    main()
