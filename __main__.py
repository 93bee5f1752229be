"""llm-training-eks: validate the stack config, declare the platform, export its outputs."""

import os

import pulumi

from infra import config, preflight, program

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

outputs = program.build(cfg)
for key, value in outputs.items():
    pulumi.export(key, value)
