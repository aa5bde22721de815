"""The `tracemill` commands, one module each, each with `register(subparsers)`."""
