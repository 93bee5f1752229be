"""The internal NLB in front of a server (a Service of type LoadBalancer, ip targets), as the
harness plays it: a TCP listener on the Service's port that gives each new connection to one
target of its target group, in turn, and pipes the bytes both ways. TLS is not played (the
listener is plain TCP on the same port).

The target group is a JSON file the harness rewrites (tests/launch/rollout.py `TargetGroup`):
`{"targets": [[address, port], ...]}`, the targets that still get new connections: the healthy
ones and those draining within their deregistration delay (requests still reach a pod whose
target is deregistering: tests/launch/rollout.py says why that reading). A target that
refuses the connection is not retried: the client's connection is closed without a byte (its
request is lost), as an NLB resets it. Arguments: PORT TARGETS_FILE.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import sys
import threading

PORT, TARGETS = int(sys.argv[1]), sys.argv[2]
turn = itertools.count()


def targets() -> list[tuple[str, int]]:
    try:
        with open(TARGETS) as f:
            return [(a, int(p)) for a, p in json.load(f)["targets"]]
    except (OSError, ValueError):
        return []


def pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        for s in (dst, src):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def forward(client: socket.socket) -> None:
    group = targets()
    if not group:
        print("no target in the target group: connection reset", flush=True)
        client.close()
        return
    address = group[next(turn) % len(group)]
    try:
        upstream = socket.create_connection(address, timeout=2)
    except OSError as e:
        print(f"target {address[0]}:{address[1]} refused the connection: {e}", flush=True)
        client.close()
        return
    upstream.settimeout(None)
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
    pipe(client, upstream)


listener = socket.create_server(("0.0.0.0", PORT))
print(f"listening on {PORT}", flush=True)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=forward, args=(conn,), daemon=True).start()
