"""Fixtures of the encryption tests: a local master key, a key vault of the test's own."""

from __future__ import annotations

from typing import Any

import pytest
from encryption_support import options_for
from pymongo import AsyncMongoClient

from asyncsession.encryption import EncryptionOptions, UserKeys


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
