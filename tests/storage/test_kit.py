"""The conformance kit (`flyteplugins_memory.testing.BackendConformance`) run on our four backends, as a
user runs it on theirs: one small subclass per backend, each overriding only `store_root`."""

from __future__ import annotations

import pytest

from backends import make_backend
from flyteplugins_memory.testing import BackendConformance, StoreRoot


class TestLocalDisk(BackendConformance):
    @pytest.fixture
    def store_root(self, tmp_path, request) -> StoreRoot:
        return StoreRoot(make_backend("local", tmp_path, request).raw_data_path)


class TestMemory(BackendConformance):
    @pytest.fixture
    def store_root(self, tmp_path, request) -> StoreRoot:
        return StoreRoot(make_backend("memory", tmp_path, request).raw_data_path)


class TestMotoS3(BackendConformance):
    @pytest.fixture
    def store_root(self, tmp_path, request, moto_endpoint) -> StoreRoot:
        # the options reach our store; upstream's goes through flyte.init(storage=...), set by make_backend
        options = {"endpoint_url": moto_endpoint, "key": "testing", "secret": "testing"}
        return StoreRoot(make_backend("s3", tmp_path, request).raw_data_path, options)


class TestGcsEmulator(BackendConformance):
    @pytest.fixture
    def store_root(self, tmp_path, request) -> StoreRoot:
        why = "flyte.storage reaches GCS through obstore, which does not read STORAGE_EMULATOR_HOST"
        return StoreRoot(make_backend("gcs", tmp_path, request).raw_data_path, upstream=False, why_not=why)
