"""The allowlist proxy process: proxy.py's own `Proxy`, stopped cleanly on SIGTERM or when its parent dies.

Started by `_network.proxy_for` as `python -m openenv_sdk.sandbox._egress_proxy <proxy.py flags>`.
proxy.py runs its acceptors in child processes; turning SIGTERM (and the server's death, through
`PR_SET_PDEATHSIG`) into a clean exit of `Proxy` stops them too.
"""

from __future__ import annotations

import ctypes
import signal
import sys
import time
from types import FrameType

PR_SET_PDEATHSIG = 1


def _stop(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    signal.signal(signal.SIGTERM, _stop)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: the server stops us itself
    from proxy import Proxy

    try:
        with Proxy(sys.argv[1:]):
            while True:
                time.sleep(1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
