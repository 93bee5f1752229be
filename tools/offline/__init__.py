"""What the offline commands share: the program under Pulumi's mocks and the plan's table."""
