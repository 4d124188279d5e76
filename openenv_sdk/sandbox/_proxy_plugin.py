"""The allowlist as a plugin of [proxy.py](https://github.com/abhinavsingh/proxy.py).

Loaded by the egress proxy process (`openenv_sdk.sandbox._egress_proxy`), which passes the policy
as JSON in `OPENENV_EGRESS_POLICY` (`{"allow": [...], "pins": {...}}`). For every request, plain
HTTP or `CONNECT`, the host is checked against the rules before anything resolves it
(`_allowlist.check_request`); a refusal answers 403 with the reason, and an allowed request
connects to the vetted address (never re-resolved by proxy.py).
"""

from __future__ import annotations

import json
import os
from typing import Any

from proxy.http.exception import HttpRequestRejected
from proxy.http.parser import HttpParser
from proxy.http.proxy import HttpProxyBasePlugin

from ._allowlist import EgressRefused, check_request, parse_allow

POLICY_ENV = "OPENENV_EGRESS_POLICY"

_policy: dict[str, Any] = json.loads(os.environ.get(POLICY_ENV) or '{"allow": []}')
_RULES = parse_allow(_policy.get("allow", []))
_PINS: dict[str, str] = dict(_policy.get("pins", {}))


class AllowlistPlugin(HttpProxyBasePlugin):
    """Refuses every request whose host is not on the allowlist or resolves to an internal address."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address: str | None = None

    def before_upstream_connection(self, request: HttpParser) -> HttpParser | None:
        host = (request.host or b"").decode("ascii", errors="replace")  # a non-ASCII name matches no entry
        port = int(request.port or 0)
        try:
            self._address = check_request(host, port, _RULES, pins=_PINS)
        except EgressRefused as e:
            raise HttpRequestRejected(
                status_code=403, reason=b"Forbidden", body=f"openenv egress: {e}\n".encode(), headers={b"Connection": b"close"}
            ) from None
        return request

    def resolve_dns(self, host: str, port: int) -> tuple[str | None, None]:
        if self._address is None:  # before_upstream_connection always runs first; never resolve on our own
            raise HttpRequestRejected(status_code=403, reason=b"Forbidden")
        return self._address, None
