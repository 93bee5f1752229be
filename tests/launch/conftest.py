"""The launch-chain harness (see test_launch_chain.py); its stand-ins are programs, not tests."""

collect_ignore_glob = ["standins/*"]
