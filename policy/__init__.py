"""CrossGuard policy pack of llm-training-eks; the rules live in `policy.rules`."""
