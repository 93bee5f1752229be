"""The security context of every pod a recipe renders, by what its process needs.

Every pod: the container runtime's default seccomp profile (`RuntimeDefault`), no privilege
escalation, every capability dropped (and only the named ones added back), no service-account
token (none of these pods calls the Kubernetes API; mpi-operator v0.8.0's v2 launcher reaches
its workers over ssh and reads its hostfile from a ConfigMap volume).

Non-root (user and group NON_ROOT_UID, HOME on /tmp): the image check, the data steps,
TensorBoard and the shell pod. Root, by necessity:
- MPI workers run sshd the way the images and the operator set it up: system sshd on port 22,
  host keys made at start into /etc/ssh, the operator's keys mounted at `sshAuthMountPath`
  /root/.ssh, which the operator mounts with mode 0600 only at that path (setupSSHOnPod); the
  operator's non-root design (its `pi` example: sshd of an unprivileged user on port 2222 with
  its own sshd_config, NET_BIND_SERVICE set on the binary) needs images built for it. sshd
  keeps NET_BIND_SERVICE (port 22), SYS_CHROOT, SETUID and SETGID (privilege separation, the
  session's groups), AUDIT_WRITE (Debian/Ubuntu's sshd writes a login audit record and refuses
  the login when it cannot); SYS_NICE, because containerd's default seccomp profile allows
  mbind, set_mempolicy and get_mempolicy only to containers holding it
  (tests/upstream/containerd-seccomp-default.yaml) and the collectives place memory by NUMA node.
- MPI launchers run ssh and mpirun as root to use that key (owned by root, 0600); they need
  no capability.
- The shared-directory step (`<workload>-dirs`) creates the workload's directory as root and
  hands its `data/` to the non-root user: CHOWN only.
Root pods keep a writable root file system (sshd, mpirun and the frameworks write there); the
non-root pods whose processes are known (image check, TensorBoard, the directory step) get a
read-only one with an emptyDir on /tmp.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from facts.names import PRIVILEGED_EXCEPTION_ANNOTATION

Obj = dict[str, Any]

NON_ROOT_UID = 10001
"""User and group of the non-root pods: 10000 or more (checkov CKV_K8S_40), unused by the images."""
SCRATCH = "/tmp"
SSHD_CAPABILITIES = ("AUDIT_WRITE", "NET_BIND_SERVICE", "SETGID", "SETUID", "SYS_CHROOT")
WORKER_CAPABILITIES = (*SSHD_CAPABILITIES, "SYS_NICE")
DIRS_CAPABILITIES = ("CHOWN",)
WORKER_EXCEPTION = (
    "sshd as root on port 22 (the images' and mpi-operator's /root/.ssh design): NET_BIND_SERVICE,"
    " SYS_CHROOT, SETUID, SETGID, AUDIT_WRITE; SYS_NICE for the NUMA syscalls the default seccomp"
    " profile allows only with it"
)
DIRS_EXCEPTION = "CHOWN: hands the workload's data directory on /shared to the non-root user of the data steps"


def pod_security(*, non_root: bool) -> Obj:
    """Pod-level settings: no service-account token, the runtime's seccomp profile, and the user."""
    context: Obj = {"seccompProfile": {"type": "RuntimeDefault"}}
    if non_root:
        context.update(runAsNonRoot=True, runAsUser=NON_ROOT_UID, runAsGroup=NON_ROOT_UID)
    else:
        context.update(runAsNonRoot=False, runAsUser=0)
    return {"automountServiceAccountToken": False, "securityContext": context}


def container_security(*, add: Sequence[str] = (), read_only_root: bool = False) -> Obj:
    """Container-level settings: not privileged, no escalation, every capability dropped but `add`."""
    capabilities: Obj = {"drop": ["ALL"]}
    if add:
        capabilities["add"] = list(add)
    return {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "capabilities": capabilities,
        "readOnlyRootFilesystem": read_only_root,
    }


def non_root_env() -> list[Obj]:
    """A non-root user has no home in the images: tools that write ~/.cache (huggingface-cli,
    Python packages) write under /tmp instead of failing on `/`."""
    return [{"name": "HOME", "value": SCRATCH}]


def scratch() -> tuple[Obj, Obj]:
    """The emptyDir a read-only container writes its temporary files to, and its mount."""
    return {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}, {"name": "tmp", "mountPath": SCRATCH}


def privileged_exception(container: str, reason: str) -> dict[str, str]:
    """The annotation that lets `container` add capabilities, with its reason (policy pack,
    pod-security: `<container>[,<container>...]: <reason>`)."""
    return {PRIVILEGED_EXCEPTION_ANNOTATION: f"{container}: {reason}"}
