"""Server tests: real servers on loopback ports, real clients."""
