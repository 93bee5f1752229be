"""What is true whatever a stack says: instance facts, prices, shared names.

Imports neither Pulumi nor the config: every other layer may import it.
"""
