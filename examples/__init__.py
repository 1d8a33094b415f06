"""Workflows built on `cairn.engine` alone, to show the engine knows nothing of code jobs."""
