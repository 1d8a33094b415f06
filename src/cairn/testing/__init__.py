"""Fakes and fixtures shipped with cairn, for its own tests, the demo, and users' tests."""
