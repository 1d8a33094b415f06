"""`python -m cairn` runs the CLI."""

from cairn.cli import main

main()
