"""The Hugging Face Hub files a run's training program reads, staged on /shared before it runs,
so that its ranks need no internet (their pods have no egress: infra.tenancy).

One Job with egress downloads the files the program reads (facts.needs: the run's `hub_repos`)
into a Hub cache on the shared file system, `/shared/hf-hub`, shared by every run of the tenant
that reads the same repository (a marker per repository and file set skips a repeat). The ranks
then read that cache offline: HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE (huggingface-hub and
transformers read only the cache, never the network), HF_HUB_CACHE at it. The cache is the
library's own layout (models--<owner>--<name>/refs/<revision>, snapshots/<commit>/<file>), made
by `huggingface-cli download --cache-dir` (`hf download` in the serving images, whose
huggingface-hub has no other), so the ranks find exactly what an online run would.
"""

from __future__ import annotations

import shlex

from facts import needs
from workloads.manifests.objects import SMALL_POD, Context, Obj, Step, job, labels, short_hash

CACHE_DIR = "hf-hub"
"""The Hub cache's directory in the tenant's /shared."""


def cache_dir(ctx: Context) -> str:
    """Where the staged Hub files are, as every pod of the tenant sees them."""
    return f"{ctx.shared_mount}/{CACHE_DIR}"


def offline_env(ctx: Context) -> dict[str, str]:
    """The environment of a process that reads the staged files and never the network."""
    return {**dict.fromkeys(needs.OFFLINE_ENV, "1"), needs.CACHE_ENV: cache_dir(ctx)}


def _stage(repo: needs.HubRepo, cache: str, cli: needs.HubCli) -> str:
    """Download one repository's files into the cache once, then check the required ones are there."""
    folder = f"{cache}/{needs.cache_folder(repo.repo)}"
    marker = f"{cache}/.staged/{needs.cache_folder(repo.repo)}-{short_hash(repo)}"
    patterns = [shlex.quote(p) for p in repo.patterns]
    include = " ".join(f"--include {p}" for p in patterns) if cli.include_each else f"--include {' '.join(patterns)}"
    download = (
        f"{cli.program} download {shlex.quote(repo.repo)} --revision {shlex.quote(repo.revision)}"
        f" --cache-dir {cache} {include}"
    )
    checks = "".join(
        f'test -f "{folder}/snapshots/$commit/{f}"'
        f' || {{ echo "FAIL: {repo.repo} has no {f} at {repo.revision}"; exit 1; }}\n'
        for f in repo.files
    )
    return (
        f"if [ -f {marker} ]; then echo '{repo.repo} already staged'; else\n"
        f"{download}\n"
        f"commit=$(cat {folder}/refs/{repo.revision})\n"
        f"{checks}"
        f"mkdir -p {cache}/.staged && touch {marker}\nfi\n"
    )


def stage(
    workload_name: str,
    ctx: Context,
    repos: tuple[needs.HubRepo, ...],
    after: tuple[str, ...],
    token_secret: str | None = None,
    cli: needs.HubCli = needs.HUB_CLI_LEGACY,
    timeout: int = 3600,
    check: str = "",
) -> Step:
    """The Job that stages `repos` into the tenant's Hub cache (it may reach the internet; it
    runs as the non-root data user, which owns the cache: shared_dirs makes it). With
    `token_secret`, the Secret's token is a read-only file the client reads (a gated model); `cli`:
    the command line of the image's huggingface-hub (the training images': `huggingface-cli`);
    `timeout`: what `pulumi up` waits for it (a served model's: estimates.staging); `check`: bash
    run after the files are staged, at every run (a served model's shape: hub_check)."""
    name = f"{workload_name}-hub-{short_hash(repos)}"
    cache = cache_dir(ctx)
    marker, version = needs.CACHE_MARKER
    script = (
        "".join(_stage(repo, cache, cli) for repo in repos)
        + check
        # transformers' cache version: without it every rank would try to migrate the cache.
        + f"test -f {cache}/{marker} || echo {version} > {cache}/{marker}"
    )
    # The hub client's own files (token, telemetry) in the pod's scratch, not the shared cache.
    env = [{"name": "HF_HOME", "value": "/tmp/huggingface"}]
    mounts: tuple[tuple[Obj, Obj], ...] = ()
    if token_secret:
        env, mount = hugging_face_token_file(token_secret, home_writable=cli.writes_home)
        mounts = (mount,)
    obj = job(
        name,
        ctx,
        labels(workload_name, "data", internet=True),
        script,
        env=env,
        timeout=timeout,
        resources=SMALL_POD,
        mounts=mounts,
    )
    return Step(name, "hub", obj, after=after)


HF_TOKEN_DIR = "/etc/huggingface"
"""Where the download Jobs find the token: `$HF_HOME/token`, the file huggingface-hub 0.22.2
reads when HF_TOKEN is not set (utils/_token.py get_token, constants.HF_TOKEN_PATH)."""


def hugging_face_token_file(secret_name: str, home_writable: bool = False) -> tuple[list[Obj], tuple[Obj, Obj]]:
    """The token as a read-only file, not an environment variable (a child process or a crash
    dump would carry an environment): HF_HOME points at the Secret's volume for the token,
    and the hub's caches, which it writes, go to /tmp (HF_HUB_CACHE, HF_ASSETS_CACHE). With
    `home_writable` (a CLI that writes HF_HOME: hub 1.x's `hf`), HF_HOME is scratch in /tmp and
    HF_TOKEN_PATH names the token file."""
    items = [{"key": "HF_TOKEN", "path": "token"}]
    volume = {"name": "hf-token", "secret": {"secretName": secret_name, "items": items, "defaultMode": 0o444}}
    mount = (volume, {"name": "hf-token", "mountPath": HF_TOKEN_DIR, "readOnly": True})
    if home_writable:
        return [
            {"name": "HF_HOME", "value": "/tmp/huggingface"},
            {"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_DIR}/token"},
        ], mount
    env = [
        {"name": "HF_HOME", "value": HF_TOKEN_DIR},
        {"name": "HF_HUB_CACHE", "value": "/tmp/huggingface/hub"},
        {"name": "HF_ASSETS_CACHE", "value": "/tmp/huggingface/assets"},
    ]
    return env, mount
