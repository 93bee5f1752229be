"""IAM documents: least privilege, and every action is a real API operation.

Independent reference for the actions: botocore's service models. An IAM action
`<prefix>:<Operation>` of these services is the API operation of the same name, so an
action that no model knows (a typo, a renamed operation) fails here instead of at `pulumi up`.
"""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import pytest

from infra import iam

KEY = "arn:aws:kms:us-west-2:123456789012:key/abcd"
GROUP = "arn:aws:logs:us-west-2:123456789012:log-group:/vpc/x/flow-logs"
FS = "arn:aws:fsx:us-west-2:123456789012:file-system/fs-0123"
ROLE = "arn:aws:iam::123456789012:role/nodes"
BUCKET = "arn:aws:s3:::data-bucket"
# IAM action prefix -> botocore service name.
SERVICES = {"kms": "kms", "logs": "logs", "fsx": "fsx", "ecr": "ecr", "sts": "sts"}
# Actions that grant a permission but are no API operation (Service Authorization Reference,
# "Actions, resources, and condition keys for AWS Security Token Service": TagSession is
# "permission only").
PERMISSION_ONLY = {"sts:TagSession"}


def statements(doc: str) -> list[dict[str, Any]]:
    parsed = json.loads(doc)
    assert parsed["Version"] == "2012-10-17"
    return list(parsed["Statement"])


def actions(doc: str) -> list[str]:
    out: list[str] = []
    for st in statements(doc):
        a = st["Action"]
        out.extend([a] if isinstance(a, str) else a)
    return out


DOCUMENTS = {
    "kms_envelope": iam.kms_envelope_policy(KEY),
    "log_writer": iam.log_writer_policy(GROUP),
    "fsx_csi": iam.fsx_csi_controller_policy(FS),
    "ecr_pull": iam.ecr_pull_policy(ROLE),
    "service_trust": iam.service_trust_policy("eks.amazonaws.com", tag_session=True),
    "irsa_trust": iam.irsa_trust_policy(
        "arn:aws:iam::123456789012:oidc-provider/oidc.eks.x", "https://oidc.eks.x", "kube-system", "sa"
    ),
}


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_every_action_is_an_operation_of_its_service(name: str) -> None:
    session = botocore.session.get_session()
    for action in set(actions(DOCUMENTS[name])) - PERMISSION_ONLY:
        prefix, _, operation = action.partition(":")
        model = session.get_service_model(SERVICES[prefix])
        assert operation in model.operation_names, f"{action}: no such {prefix} operation in botocore's model"


def test_control_plane_uses_only_the_secrets_key() -> None:
    (st,) = statements(iam.kms_envelope_policy(KEY))
    assert st["Effect"] == "Allow" and st["Resource"] == KEY
    assert not any(a.endswith("*") for a in actions(iam.kms_envelope_policy(KEY)))


def test_flow_logs_write_to_their_group_only() -> None:
    """The flow-logs role policy of the VPC guide ("IAM role for publishing flow logs to
    CloudWatch Logs"): writes scoped to the group; DescribeLogGroups lists, so it cannot be."""
    write, describe = statements(iam.log_writer_policy(GROUP))
    assert write["Resource"] == [GROUP, f"{GROUP}:*"]
    assert set(write["Action"]) == {"logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"}
    assert describe["Action"] == ["logs:DescribeLogGroups"]
    assert describe["Resource"] == [GROUP.split(":log-group:")[0] + ":log-group:*"]


def test_fsx_csi_controller_may_grow_its_file_system_but_not_create_or_delete() -> None:
    doc = iam.fsx_csi_controller_policy(FS)
    by_action = {a: st["Resource"] for st in statements(doc) for a in st["Action"]}
    assert by_action == {"fsx:DescribeFileSystems": "*", "fsx:UpdateFileSystem": FS}


def test_nodes_pull_images_read_only() -> None:
    (st,) = statements(iam.ecr_pull_policy(ROLE))
    assert st["Principal"] == {"AWS": ROLE}
    assert all(a.split(":")[1].startswith(("Batch", "Get")) for a in st["Action"])


def test_bucket_refuses_plain_http() -> None:
    (st,) = statements(iam.deny_insecure_transport(BUCKET))
    assert st["Effect"] == "Deny" and st["Resource"] == [BUCKET, f"{BUCKET}/*"]
    assert st["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_irsa_trusts_one_service_account_of_one_issuer() -> None:
    (st,) = statements(DOCUMENTS["irsa_trust"])
    assert st["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert st["Condition"]["StringEquals"] == {
        "oidc.eks.x:sub": "system:serviceaccount:kube-system:sa",
        "oidc.eks.x:aud": "sts.amazonaws.com",
    }
