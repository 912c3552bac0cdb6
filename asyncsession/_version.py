"""The installed distribution's version, read once from its metadata."""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("asyncsession")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
