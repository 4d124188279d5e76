"""OpenEnv wire-protocol conformance suite; see README.md."""
