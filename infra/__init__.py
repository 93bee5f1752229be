"""llm-training-eks infrastructure: one module per AWS concern, each a ComponentResource."""
