"""CrossGuard policy pack: `pulumi preview --policy-pack policy [--policy-pack-config cfg.json]`.

The engine runs this file as `python -u -m pulumi.policy <engine> <pack dir>` from the pack's
directory (pulumi-language-python `RunPlugin`); `PolicyPack` then serves the policies of
`policy.crossguard` over gRPC. Pack config, per policy: `{"stateful-protected":
{"protectStatefulResources": false}, "flow-log-groups-protected": {...},
"efa-node-groups": {"reservationAzs": {"cr-...": "us-west-2d"}, "lookUpReservations": true}}`.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The pack runs from policy/; the rules import facts/ from the project root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import PolicyPack

from policy.crossguard import PACK_NAME, policies

if __name__ == "__main__":
    PolicyPack(name=PACK_NAME, policies=policies())
