"""Which commit each stack was last deployed at, and what changed for it since.

A deploy job runs in the GitHub environment named after its stack, so GitHub records a
deployment of that environment at the run's commit, and its status (`success` when the job
succeeded). The last successful one is the commit the stack's live state was last brought to;
every change since then is still to deploy, whichever merge brought it and whether or not that
merge's own run was cancelled or failed (REST API: "List deployments", filtered by
`environment`, newest first; "List deployment statuses", newest first).
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Fetch = Callable[[str], Any]
"""GET a GitHub REST path (with its query) and return the decoded JSON."""
SCANNED = 100
"""The newest deployments of an environment looked at (one page)."""


def github_fetch(api: str | None = None, token: str | None = None) -> Fetch:
    """A `Fetch` on the REST API of the workflow's GitHub (GITHUB_API_URL, GH_TOKEN)."""
    base = (api or os.environ.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/")
    token = token or os.environ.get("GH_TOKEN") or os.environ.get("GITHUB_TOKEN") or ""

    def fetch(path: str) -> Any:
        request = urllib.request.Request(
            f"{base}/{path.lstrip('/')}",
            headers={"Accept": "application/vnd.github+json", "Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    return fetch


def last_deployed(fetch: Fetch, repo: str, stack: str) -> str | None:
    """The commit of the newest deployment of environment `stack` that succeeded; None if none did."""
    query = urllib.parse.urlencode({"environment": stack, "per_page": SCANNED})
    for deployment in fetch(f"repos/{repo}/deployments?{query}"):
        statuses = fetch(f"repos/{repo}/deployments/{deployment['id']}/statuses?per_page=100")
        if any(s.get("state") == "success" for s in statuses):
            return str(deployment["sha"])
    return None


def changed_since(base: str | None, head: str, cwd: Path) -> list[str] | None:
    """The paths that differ between `base` and `head`; None when there is no base (never
    deployed) or git does not know it (history rewritten): everything is to deploy."""
    if base is None:
        return None
    result = subprocess.run(
        ["git", "diff", "--name-only", base, head], cwd=cwd, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        return None
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def last_deployed_all(fetch: Fetch, repo: str, stacks: Sequence[str]) -> dict[str, str | None]:
    """`last_deployed` of every stack."""
    return {stack: last_deployed(fetch, repo, stack) for stack in stacks}
