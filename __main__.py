"""llm-training-eks: validate the stack config, check the account, declare the stack's layer, export its outputs."""

import os

import pulumi

import config
import stack
from tools import preflight

cfg = config.load()
# Preflight asks the AWS account whether the stack can run (offerings, EFA, reservations,
# quotas) through the stack's own AWS provider, and stops `pulumi preview`/`up` before anything
# else is declared. Only stacks that declare node groups (all-in-one and aws layer); never under
# mocks; LLM_TRAINING_EKS_PREFLIGHT=false skips it (e.g. a preview without EC2 read access).
wants_preflight = cfg.layer in ("all", "aws") and not preflight.under_mocks()
if os.environ.get("LLM_TRAINING_EKS_PREFLIGHT", "true").lower() != "false" and wants_preflight:
    preflight.gate(cfg)

try:
    outputs = stack.build_layer(cfg)
except config.ConfigError as e:
    # A layered stack checks its config against the lower stack's outputs before it declares anything.
    for line in e.problems:
        pulumi.log.error(line)
    raise pulumi.RunError(f"invalid stack config ({len(e.problems)} problem(s)); nothing was created") from None
for key, value in outputs.items():
    pulumi.export(key, value)
