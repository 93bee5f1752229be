"""What the CI routing knows of deploys: their time budgets and what changed since."""
