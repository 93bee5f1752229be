"""IAM policy documents the components share."""

from __future__ import annotations

import json


def service_trust_policy(service: str, *, tag_session: bool = False) -> str:
    """Trust policy letting one AWS service principal assume a role (and tag the session,
    which EKS and EKS Pod Identity need)."""
    action: str | list[str] = ["sts:AssumeRole", "sts:TagSession"] if tag_session else "sts:AssumeRole"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": action}],
        },
        sort_keys=True,
    )
