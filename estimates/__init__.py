"""Estimates: what a stack and its runs will cost and take, from typed inputs.

What it is: pure functions and frozen dataclasses that turn numbers, facts types
(facts.instances.InstanceType, the price table, published measurements) and small input
dataclasses of its own into typed estimates: cost per hour and month (`cost`), a model's
parameters and FLOPs (`model`), step time from a published measurement (`bridge`), tokens/s and
MFU (`throughput`), checkpoint size, write time and share (`checkpoints`), the way to a run's
first step and a server's start (`startup`), the length of a fabric acceptance run (`acceptance`),
a training run's learning-rate schedule over its steps (`schedule`) and its length with validation
and export (`run_length`). Later estimates (reserved-capacity prices) belong here too, with inputs
of the same kind.

What it is not: it reads facts only (facts -> estimates -> config -> ...): never a stack file,
a pydantic config model, pulumi or a planned resource's Pulumi state. The config layer builds
its inputs (a recipe's small `*_input` methods, config/costs.py for a whole stack) and the
components and tools show its results; nothing here refuses a config (config/checks does, with
the figures from here).
"""
