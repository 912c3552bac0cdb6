"""Fixtures of the encryption tests: a local master key, a key vault of the test's own."""

from __future__ import annotations

import base64
import socket
from typing import Any

import pytest
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession.encryption import EncryptionOptions, UserKeys

LOCAL_KEY = base64.b64encode(bytes(range(96))).decode()
"""A fixed local master key (base64), so that child processes can be given it."""


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def options_for(
    database: AsyncDatabase[Any] | None, key: str | bytes = LOCAL_KEY
) -> EncryptionOptions:
    """A local-key setting whose key vault is in ``database`` (dropped after the test)."""
    namespace = f"{database.name}.keyvault" if database is not None else "vault.keys"
    return EncryptionOptions.local(key, key_vault_namespace=namespace)


@pytest.fixture(
    params=[
        pytest.param("mongo", id="mongo", marks=pytest.mark.mongodb),
        pytest.param("in-process", id="in-process"),
    ]
)
def vault(request: pytest.FixtureRequest) -> str:
    """Where the data keys are kept: on the test server, or in this process."""
    return str(request.param)


@pytest.fixture
def setting(request: pytest.FixtureRequest, vault: str) -> EncryptionOptions:
    """A local-key setting with a key vault of this test's own."""
    if vault == "mongo":
        return options_for(request.getfixturevalue("mongo_db"))
    return options_for(None)


@pytest.fixture
def new_keys(request: pytest.FixtureRequest, vault: str, setting: EncryptionOptions) -> Any:
    """Builds `UserKeys` on the test's vault: each call is another key cache of the process."""
    client: AsyncMongoClient[Any] | None = (
        request.getfixturevalue("mongo_client") if vault == "mongo" else None
    )

    def make(options: EncryptionOptions | None = None) -> UserKeys:
        return UserKeys(options or setting, client)

    return make


@pytest.fixture
def keys(new_keys: Any) -> UserKeys:
    """User keys on the test's vault."""
    made: UserKeys = new_keys()
    return made
