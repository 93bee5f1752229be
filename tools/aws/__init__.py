"""What preflight reads of the AWS account, and the checks it makes of what it read."""
