"""cairn: resumable AI coding jobs against git repositories."""

__version__ = "0.1.0"

__all__ = ["__version__"]
