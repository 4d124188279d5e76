"""`openenv_sdk.fleet`'s API, and `import openenv_sdk` staying free of Ray."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("ray")


def test_fleet_api() -> None:
    import openenv_sdk.fleet

    assert sorted(openenv_sdk.fleet.__all__) == ["FleetMember", "FleetServer", "RayFleet"]


def test_import_openenv_sdk_does_not_import_ray() -> None:
    code = "import sys, openenv_sdk, openenv_sdk.providers, openenv_sdk.client; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_bad_arguments_are_refused_before_anything_starts() -> None:
    from openenv_sdk.fleet import RayFleet

    with pytest.raises(ValueError, match="at least one server, got size=0"):
        RayFleet("environments/echo", size=0)
    with pytest.raises(ValueError, match="probe_timeout_s must be positive, got 0"):
        RayFleet("environments/echo", size=1, probe_timeout_s=0)
