"""llm-training-eks: validate the stack config, check the account, declare the platform, export its outputs."""

import os

import pulumi

import config
import stack
from tools import preflight

cfg = config.load()
# Preflight asks the AWS account whether the stack can run (offerings, EFA, reservations,
# quotas) and stops `pulumi preview`/`up` before anything is created. Never under mocks;
# LLM_TRAINING_EKS_PREFLIGHT=false skips it (e.g. a preview without EC2 read access).
if os.environ.get("LLM_TRAINING_EKS_PREFLIGHT", "true").lower() != "false" and not preflight.under_mocks():
    try:
        preflight.gate(cfg)
    except preflight.NoCredentials as e:
        pulumi.log.error(str(e))
        raise pulumi.RunError("preflight: no AWS credentials; nothing was created") from None

for key, value in stack.build(cfg).items():
    pulumi.export(key, value)
