"""The kubelet's HTTP probes of one container, run in its pod's network namespace (the kubelet
probes the pod's address from the node; no NetworkPolicy stands between them): the startup
probe every periodSeconds until it succeeds or has failed failureThreshold times in a row (then
the kubelet kills the container), then the readiness probe until it succeeds (the pod is ready).
A probe succeeds on a status from 200 to 399 within timeoutSeconds. The harness's clock runs
`scale` times as fast (periods only; a timeout stays in real seconds, at most 2). Argument: a
JSON document {address, port, path, startup, readiness, scale}; prints one line per outcome."""

from __future__ import annotations

import http.client
import json
import sys
import time


def probe(spec: dict, timeout: float) -> str | None:
    """None when the probe succeeds, else why it failed (as the kubelet's event says)."""
    conn = http.client.HTTPConnection(spec["address"], spec["port"], timeout=min(timeout, 2.0))
    try:
        conn.request("GET", spec["path"])
        status = conn.getresponse().status
    except OSError as e:
        return f"Get http://{spec['address']}:{spec['port']}{spec['path']}: {e}"
    finally:
        conn.close()
    return None if 200 <= status < 400 else f"HTTP probe failed with statuscode: {status}"


def run(spec: dict, kind: str) -> bool:
    settings, failures = spec[kind], 0
    while True:
        time.sleep(settings.get("periodSeconds", 10) * spec["scale"])
        why = probe(spec, settings.get("timeoutSeconds", 1))
        if why is None:
            return True
        failures += 1
        if kind == "startup" and failures >= settings.get("failureThreshold", 3):
            print(f"startup probe failed {failures} times: {why}", flush=True)
            return False


def main() -> None:
    spec = json.loads(sys.argv[1])
    if not run(spec, "startup"):
        sys.exit(1)
    print("started", flush=True)
    run(spec, "readiness")
    print("ready", flush=True)


if __name__ == "__main__":
    main()
