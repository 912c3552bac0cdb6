"""How a MongoDB store names itself to the server: the driver metadata of its handshakes."""

from __future__ import annotations

from pymongo import AsyncMongoClient, MongoClient
from pymongo.driver_info import DriverInfo

from ..._version import __version__

__all__ = ["driver_info", "identify"]


def driver_info() -> DriverInfo:
    """The library's name and version, for a client's handshake."""
    return DriverInfo(name="asyncsession", version=__version__)


def identify(client: object) -> None:
    """Name the library in a borrowed PyMongo client's handshake (Motor wraps one)."""
    if not isinstance(client, AsyncMongoClient):
        client = getattr(client, "delegate", None)
    if isinstance(client, AsyncMongoClient | MongoClient):
        client.append_metadata(driver_info())
