"""The ``musa`` backend where torch_musa is absent (it has not been run on MUSA hardware)."""

from __future__ import annotations

import importlib.util

import pytest

from kernelgym import Verifier
from kernelgym.backends import backend_language, get_backend
from kernelgym.backends.cuda import peak_bandwidth_gbs
from kernelgym.backends.musa import MUSA_BANDWIDTH_GBS
from kernelgym.errors import BackendUnavailableError

no_torch_musa = pytest.mark.skipif(importlib.util.find_spec("torch_musa") is not None, reason="torch_musa is installed")


@no_torch_musa
def test_musa_backend_names_the_missing_torch_musa() -> None:
    reason = get_backend("musa").unavailable_reason()
    assert reason is not None and "torch_musa is not installed" in reason
    with pytest.raises(BackendUnavailableError, match="'musa' cannot run here: torch_musa is not installed"):
        Verifier(backend="musa")


@no_torch_musa
def test_musa_backend_without_torch_musa_has_no_devices() -> None:
    backend = get_backend("musa")
    assert backend.device_available() is False
    assert backend.device_count() == 0
    assert backend.default_bandwidth_gbs == backend.fallback_bandwidth_gbs


def test_musa_workers_are_pinned_with_musa_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUSA_VISIBLE_DEVICES", "2,3")
    assert get_backend("musa").worker_environment(1)["MUSA_VISIBLE_DEVICES"] == "3"


def test_musa_contract() -> None:
    backend = get_backend("musa")
    assert backend.device_type == "musa"
    assert backend.arch_list_env == "TORCH_MUSA_ARCH_LIST"
    assert backend.arch_string(2, 2) == "22"
    assert backend.address_space_limit_ok is False
    assert "musa_sources" in backend_language("musa")
    assert peak_bandwidth_gbs("MTT S4000", MUSA_BANDWIDTH_GBS) == 768.0
