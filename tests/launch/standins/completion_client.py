"""A client of the server (the harness's client pod): POST /v1/completions to the URL given, for
the model name given; or with `--get URL` (the metrics scraper) a GET of that URL. Prints the
status and body; exit 0 on 200, else 1 (a connection that fails: its error)."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

if sys.argv[1] == "--get":
    url = sys.argv[2]
    request = urllib.request.Request(url)
else:
    url, model = sys.argv[1], sys.argv[2]
    body = json.dumps({"model": model, "prompt": "The capital of France is", "max_tokens": 4}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=10) as response:
        print(response.status, response.read().decode(), flush=True)
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode(), flush=True)
    sys.exit(1)
except OSError as e:
    print(f"connection to {url} failed: {e}", flush=True)
    sys.exit(1)
