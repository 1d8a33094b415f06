"""The acceptance harness (the real `cairn` console script) for the forge review tests."""

from tests.acceptance.conftest import cli, template_home

__all__ = ["cli", "template_home"]
