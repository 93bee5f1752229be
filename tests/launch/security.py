"""What the kubelet and containerd make of a pod's securityContext and volumes, for the pods of
the harness (facts: tests/upstream/kubelet-pod-security.yaml, amazon-eks-ami-base-runtime-spec.yaml):

- the effective context: the container's runAsUser, runAsGroup, runAsNonRoot over the pod's
  (DetermineEffectiveSecurityContext); capabilities, allowPrivilegeEscalation and
  readOnlyRootFilesystem are the container's own;
- runAsNonRoot: the kubelet refuses to start a container that would run as uid 0 (the images
  here declare no USER: root), with its own message (verifyRunAsNonRoot);
- capabilities: the runtime's default set, minus `drop` (ALL: every one), plus `add`; a
  process of a non-root user keeps none across exec (no ambient capabilities are set);
- allowPrivilegeEscalation false: no_new_privs; readOnlyRootFilesystem: the image's file
  system read-only, volumes as mounted;
- volumes: a persistentVolumeClaim is the shared FSx directory, an emptyDir a fresh directory
  (tmpfs), a Secret's listed items read-only files (mode: the item's, defaultMode, 0644); any
  other kind of volume fails the harness, naming it (not modelled).
"""

from __future__ import annotations

import pwd
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests import upstream

FACTS = upstream.facts("kubelet-pod-security")
RUNTIME = upstream.facts("amazon-eks-ami-base-runtime-spec")
IMAGE_USER = (0, 0)  # no USER in images/*/Dockerfile nor in horovod-cpu's: root


@dataclass(frozen=True)
class Security:
    uid: int
    gid: int
    groups: tuple[int, ...]
    capabilities: tuple[str, ...]
    no_new_privs: bool
    read_only_root: bool
    refused: str | None  # the kubelet's error: the container is never started
    home: str


def effective(pod: dict[str, Any], container: dict[str, Any], pod_name: str) -> Security:
    psc, csc = pod.get("securityContext") or {}, container.get("securityContext") or {}
    merged = {**{k: psc[k] for k in FACTS["inheritedFromPod"] if k in psc}, **csc}
    if merged.get("privileged"):
        raise NotImplementedError(f"{pod_name}: privileged containers are not modelled")
    uid, gid = int(merged.get("runAsUser", IMAGE_USER[0])), int(merged.get("runAsGroup", IMAGE_USER[1]))
    refused = None
    if merged.get("runAsNonRoot") and uid == 0:
        key = "runAsUserBreaksNonRoot" if "runAsUser" in merged else "imageRunsAsRoot"
        refused = FACTS["refusals"][key].format(pod=pod_name, container=container["name"])
    caps = set(RUNTIME["capabilities"])
    drop, add = ((csc.get("capabilities") or {}).get(k, []) for k in ("drop", "add"))
    caps = set() if "ALL" in drop else caps - {f"CAP_{c}" for c in drop}
    caps |= {f"CAP_{c}" for c in add}
    groups = tuple(
        int(g) for g in [*psc.get("supplementalGroups", []), *([psc["fsGroup"]] if "fsGroup" in psc else [])]
    )
    try:
        home = pwd.getpwuid(uid).pw_dir  # the image's /etc/passwd is this machine's here
    except KeyError:
        home = "/"
    return Security(
        uid,
        gid,
        groups,
        tuple(sorted(caps)),
        csc.get("allowPrivilegeEscalation") is False,
        bool(csc.get("readOnlyRootFilesystem")),
        refused,
        home,
    )


def volume_mounts(
    pod: dict[str, Any], container: dict[str, Any], shared: Path, shared_ro: bool
) -> list[dict[str, object]]:
    """The container's volumeMounts as the pod's mounts (`tmpfs` ones are emptyDirs)."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts: list[dict[str, object]] = []
    for m in container.get("volumeMounts", []):
        volume, read_only = volumes[m["name"]], bool(m.get("readOnly"))
        if "subPath" in m:
            raise NotImplementedError(f"volume {m['name']}: subPath mounts are not modelled")
        if "persistentVolumeClaim" in volume:
            mounts.append({"source": str(shared), "target": m["mountPath"], "readOnly": read_only or shared_ro})
        elif "secret" in volume and volume["secret"].get("items"):
            # The kubelet's Secret volume (files behind ..data links, read-only); the value is a
            # placeholder, as for a secretKeyRef (mpioperator.container_env).
            secret = volume["secret"]
            files = {
                item["path"]: [
                    f"harness-secret-{secret['secretName']}-{item['key']}",
                    item.get("mode", secret.get("defaultMode", 0o644)),
                ]
                for item in secret["items"]
            }
            mounts.append({"secret": files, "target": m["mountPath"]})
        elif "emptyDir" in volume:
            mode = "1777" if (volume["emptyDir"] or {}).get("medium") == "Memory" else "777"
            mounts.append({"tmpfs": mode, "target": m["mountPath"], "readOnly": read_only})
        else:
            kind = next(k for k in volume if k != "name")
            raise NotImplementedError(
                f"volume {m['name']} ({kind}): only persistentVolumeClaim, emptyDir and Secret items are modelled"
            )
    return mounts
