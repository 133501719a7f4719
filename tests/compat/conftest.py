"""Fixtures of the compatibility tests with Flyte's agent stack."""

from __future__ import annotations

import pytest

from flyteplugins_memory import install, uninstall


@pytest.fixture
def installed():
    """Our class in place of upstream's for Flyte's agent plugins (`install()`), upstream's again after."""
    install()
    yield
    uninstall()
