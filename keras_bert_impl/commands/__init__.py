"""Subcommands of `kbert`, each exposing add_parser(subparsers)."""
