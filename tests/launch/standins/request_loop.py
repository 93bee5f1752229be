"""A client that calls the server without pause (the harness's caller through a rollout or a
next run): POST /v1/completions to URL for MODEL on a new connection each time (as a client
behind an NLB opens them), one line per request: `ok <status>` for a 200 with a completion, else
`lost <why>`; INTERVAL seconds between requests. Runs until its pod is deleted. Arguments: URL
MODEL INTERVAL."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request

url, model, interval = sys.argv[1], sys.argv[2], float(sys.argv[3])
body = json.dumps({"model": model, "prompt": "The capital of France is", "max_tokens": 4}).encode()
print("started", flush=True)
while True:
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = json.loads(response.read())["choices"][0]["text"]
            print(f"ok {response.status}" if text else "lost: an empty completion", flush=True)
    except urllib.error.HTTPError as e:
        print(f"lost {e.code} {e.read().decode()[:200]}", flush=True)
    except (OSError, ValueError) as e:
        print(f"lost {type(e).__name__}: {e}", flush=True)
    time.sleep(interval)
