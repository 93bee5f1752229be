"""The stand-in internet: one host, in a network namespace of its own outside the cluster's
addresses, that answers as huggingface.co and S3 (plain HTTP on port 443; the clients are the
stand-ins). Arguments: address, port, and a JSON file of what it serves:

    {"models": {repo: {"sha": ..., "gated": bool, "files": {name: text}}},
     "datasets": {...same...}, "s3": {"<bucket>/<key>": size}}

Hub API, as huggingface-hub 0.22/0.24 calls it (tests/upstream/huggingface-hub-0.24.5.yaml):
GET /api/{models|datasets}/<repo>/revision/<rev> (repository listing) and
GET [/datasets]/<repo>/resolve/<rev>/<file> (a file, with X-Repo-Commit). A gated repository
answers 401 without an Authorization header. Every request is logged to stdout.
"""

from __future__ import annotations

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONTENT: dict = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: object) -> None:
        print(f"{self.client_address[0]} {format % args}", flush=True)

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _repo(self, kind: str, repo: str) -> dict | None:
        found = CONTENT.get(kind, {}).get(repo)
        if found and found.get("gated") and not self.headers.get("Authorization"):
            self._send(401, b'{"error": "Access to this repository is restricted: log in"}')
            return None
        if not found:
            self._send(404, b'{"error": "Repository not found"}')
        return found

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        m = re.fullmatch(r"/api/(models|datasets)/(.+)/revision/([^/]+)", path)
        if m:
            repo = self._repo(m.group(1), m.group(2))
            if repo is not None:
                siblings = [{"rfilename": name} for name in sorted(repo["files"])]
                self._send(200, json.dumps({"id": m.group(2), "sha": repo["sha"], "siblings": siblings}).encode())
            return
        m = re.fullmatch(r"/(datasets/)?(.+)/resolve/([^/]+)/(.+)", path)
        if m:
            repo = self._repo("datasets" if m.group(1) else "models", m.group(2))
            if repo is None:
                return
            if m.group(4) not in repo["files"]:
                self._send(404, b'{"error": "Entry not found"}', {"X-Error-Code": "EntryNotFound"})
                return
            self._send(200, repo["files"][m.group(4)].encode(), {"X-Repo-Commit": repo["sha"]})
            return
        key = path.lstrip("/")
        if key in CONTENT.get("s3", {}):
            self._send(200, b"\0" * int(CONTENT["s3"][key]))
            return
        self._send(404, b"not found")

    do_HEAD = do_GET


if __name__ == "__main__":
    address, port, content = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(content) as f:
        CONTENT.update(json.load(f))
    server = ThreadingHTTPServer((address, port), Handler)
    print(f"stand-in internet listening on {address}:{port}", flush=True)
    server.serve_forever()
