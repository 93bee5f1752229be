"""Commands run beside Pulumi: the offline plan, its mocks, cost, preflight, the diagram."""
