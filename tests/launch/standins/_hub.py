"""The Hugging Face Hub client the stand-ins share, behaving as huggingface-hub and transformers
do (facts in /harness/job.json "hub", from tests/upstream/huggingface-hub-0.24.5.yaml and
transformers-4.44.0.yaml): the Hub at HF_ENDPOINT (huggingface.co, resolved through the
cluster's DNS like any name); offline mode (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE) reads only
the cache and opens no connection; the cache at HF_HUB_CACHE (else $HF_HOME/hub, else
~/.cache/huggingface/hub) in the library's layout (<kind>s--<owner>--<name>/refs/<revision>,
snapshots/<commit>/<file> linking into blobs/). A connection that fails (no egress: the pod's
NetworkPolicies) falls back to the cache, as the library does after its timeout; a required file
in neither raises transformers' OSError.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

from _common import job

TIMEOUT = 3.0  # the library waits HF_HUB_ETAG_TIMEOUT (10 s) for a dropped connection; here a route refuses at once


class HubError(OSError):
    """An answer of the Hub that is not a file (401 gated, 404 missing)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def facts() -> dict:
    return job()["hub"]


def _truthy(value: str | None) -> bool:
    return (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def offline() -> bool:
    return any(_truthy(os.environ.get(name)) for name in facts()["offline_env"])


def cache_dir() -> Path:
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub"))


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or facts()["endpoint"]


def get(path: str, token: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request to the Hub (plain TCP to its host and port: the stand-in serves no TLS)."""
    url = urlsplit(endpoint())
    with socket.create_connection((url.hostname or "", url.port or 443), timeout=TIMEOUT) as s:
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: {url.hostname}\r\n{auth}\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def folder(cache: Path, kind: str, repo: str) -> Path:
    return cache / "--".join([f"{kind}s", *repo.split("/")])


def cached(cache: Path, kind: str, repo: str, revision: str, filename: str) -> Path | None:
    """The file in the cache, through refs/<revision> (what offline mode reads)."""
    base = folder(cache, kind, repo)
    ref = base / "refs" / revision
    commit = ref.read_text().strip() if ref.is_file() else revision
    path = base / "snapshots" / commit / filename
    return path if path.is_file() else None


def download(cache: Path, kind: str, repo: str, revision: str, filename: str, token: str | None) -> Path:
    """One file from the Hub into the cache (blob, snapshot link, ref)."""
    prefix = "/datasets" if kind == "dataset" else ""
    status, headers, body = get(f"{prefix}/{repo}/resolve/{revision}/{filename}", token)
    if status != 200:
        raise HubError(
            status, f"{status} Client Error for url {endpoint()}{prefix}/{repo}/resolve/{revision}/{filename}"
        )
    base, commit = folder(cache, kind, repo), headers["x-repo-commit"]
    blob = base / "blobs" / hashlib.sha256(body).hexdigest()
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(body)
    link = base / "snapshots" / commit / filename
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(os.path.relpath(blob, link.parent))
    (base / "refs").mkdir(exist_ok=True)
    (base / "refs" / revision).write_text(commit)
    return link


def listing(kind: str, repo: str, revision: str, token: str | None) -> tuple[str, list[str]]:
    """(commit, file names) of a repository: huggingface-hub's repo_info."""
    status, _, body = get(f"/api/{kind}s/{repo}/revision/{revision}", token)
    if status != 200:
        raise HubError(status, f"{status} Client Error for url {endpoint()}/api/{kind}s/{repo}/revision/{revision}")
    doc = json.loads(body)
    return doc["sha"], [s["rfilename"] for s in doc["siblings"]]


def _selected(names: list[str], allow: list[str] | None, ignore: list[str] | None = None) -> list[str]:
    """filter_repo_objects: the names any allow pattern matches (all without), less the ignored."""
    return [
        n
        for n in names
        if (not allow or any(fnmatch.fnmatch(n, p) for p in allow))
        and not any(fnmatch.fnmatch(n, p) for p in ignore or ())
    ]


def snapshot(cache: Path, kind: str, repo: str, revision: str, patterns: list[str] | None, token: str | None) -> Path:
    """snapshot_download: the files matching any pattern (all without patterns). Like hub 1.x, the
    repository's whole listing at the commit is kept in trees/<commit>.json, whatever was kept, and
    a revision that is a commit gets no refs file."""
    commit, names = listing(kind, repo, revision, token)
    base = folder(cache, kind, repo)
    if "offline" in facts():
        tree = base / facts()["offline"]["tree_cache"].format(commit=commit)
        tree.parent.mkdir(parents=True, exist_ok=True)
        version = facts()["offline"]["tree_cache_format_version"]
        tree.write_text(
            json.dumps({"format_version": version, "files": {n: {"size": 0, "blob_id": ""} for n in names}})
        )
    for name in _selected(names, patterns):
        download(cache, kind, repo, revision, name, token)
    if revision == commit and "offline" in facts() and not facts()["offline"]["commit_revision_writes_ref"]:
        (base / "refs" / revision).unlink(missing_ok=True)
    return base / "snapshots" / commit


def snapshot_offline(repo: str, revision: str, allow: list[str] | None, ignore: list[str] | None) -> Path:
    """snapshot_download with HF_HUB_OFFLINE (hub 1.24.0, facts "offline"): the commit's snapshot
    folder, if every file of the cached listing the patterns select is in it; else the library's
    IncompleteSnapshotError, or LocalEntryNotFoundError without a snapshot."""
    off = facts()["offline"]
    base = folder(cache_dir(), "model", repo)
    ref = base / "refs" / revision
    commit = ref.read_text().strip() if ref.is_file() else revision
    snap = base / "snapshots" / commit
    if not snap.is_dir():
        raise OSError(
            f"{off['snapshot_missing']}: Cannot find an appropriate cached snapshot folder for {repo}@{revision}"
        )
    tree = base / off["tree_cache"].format(commit=commit)
    if tree.is_file():
        listed = list(json.loads(tree.read_text())["files"])
        missing = [n for n in _selected(listed, allow, ignore) if not (snap / n).exists()]
        if missing:
            raise OSError(
                f"{off['snapshot_incomplete']}: The cached snapshot for '{repo}' (revision '{revision}', commit"
                f" {commit}) is incomplete: {len(missing)} file(s) are missing ({', '.join(missing[:3])})."
            )
    return snap


def model_info(repo: str, revision: str) -> str:
    """HfApi().model_info(repo, revision).sha: a Hub call, refused offline."""
    if offline():
        raise OSError(
            f"{facts()['offline']['model_info']}: Cannot reach {endpoint()}/api/models/{repo}/revision/{revision}"
        )
    commit, _ = listing("model", repo, revision, None)
    return commit


def cached_file(repo: str, filename: str, required: bool = True, revision: str = "main") -> Path | None:
    """transformers' cached_file for a model id: offline, the cache only; online, a download that
    falls back to the cache when the connection fails; a required file found nowhere raises."""
    cache = cache_dir()
    if not offline():
        try:
            return download(cache, "model", repo, revision, filename, None)
        except HubError as e:
            if e.status == 404 and not required:
                return None
            raise
        except OSError:
            pass  # no connection: the library falls back to the cache
    found = cached(cache, "model", repo, revision, filename)
    if found is None and required:
        message = facts()["missing_error"].format(endpoint=endpoint(), repo_id=repo, filename=filename)
        raise OSError(message)
    return found
