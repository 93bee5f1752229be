"""A seeded campaign of whole stacks that combine keys across sections and layers.

tests/fuzz.py mutates one key at a time and catches values a key refuses on its own. This
campaign starts from the example stacks and applies a few moves, each legal key by key, that
meet in the destination: node groups sharing a reservation or a placement group, Capacity Blocks
of every kind and date, teams that borrow, runs with their env, health checks and model shapes,
VPCs and access lists of every size, scratch storage with persistent settings, tags, layer splits
(`generate.py`). Every stack either exits 2 with lines naming its keys, or plans, and then the plan
is held against the rules of where it ends up, and against the settings the stack asked for
(`oracle.py`). No stack may exit 1.
"""
