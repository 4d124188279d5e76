"""Environment fleets across machines, placed by Ray (`pip install 'openenv-sdk[fleet]'`).

    RayFleet      servers started by Ray actors on a cluster's nodes; one handle, clients by load
    FleetServer   one server of a fleet, as last seen
    FleetMember   one server of a fleet as a provider (for `EnvSource(provider=...)`)

Importing this package imports `ray`; `import openenv_sdk` does not.
"""

from openenv_sdk.fleet._ray import FleetMember, FleetServer, RayFleet

__all__ = ["FleetMember", "FleetServer", "RayFleet"]
