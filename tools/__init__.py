"""The commands beside Pulumi (one module each, `python -m tools.<name>`), and the library they
share in tools/offline/, tools/aws/ and tools/delivery/."""
