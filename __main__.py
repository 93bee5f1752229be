"""llm-training-eks: validate the stack config, declare the platform, export its outputs."""

import pulumi

from infra import config, program

outputs = program.build(config.load())
for key, value in outputs.items():
    pulumi.export(key, value)
