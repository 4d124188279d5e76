"""The allowlist proxy process: proxy.py's own `Proxy`, stopped cleanly on SIGTERM or when its owner dies.

Started by `_network.proxy_for` as `python -m openenv_sdk.sandbox._egress_proxy <proxy.py flags>`,
with its stdin a pipe whose write end only the owner holds. The owner's death (however it dies:
exit, SIGKILL, before this process got as far as `main`) closes that pipe, and end of file on stdin
stops the proxy. `PR_SET_PDEATHSIG` would not do: it fires when the *thread* that started us ends
(a worker thread of the server), and misses an owner that died before it was set.

proxy.py runs its acceptors and workers in forked child processes; a clean exit of `Proxy` stops
them, each gets `PR_SET_PDEATHSIG` (their parent is this process's main thread) in case this
process is killed outright, and a stop that hangs ends, after `STOP_TIMEOUT_S`, in SIGKILL to this
process group (we are its leader: `start_new_session`). Stopped for its owner's death, it removes
its folder (`FOLDER_ENV`), which the owner would have removed had it lived.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import sys
import threading
from types import FrameType

PR_SET_PDEATHSIG = 1
STOP_TIMEOUT_S = 5.0
"""How long a clean stop may take before the whole process group is killed."""
FOLDER_ENV = "OPENENV_EGRESS_PROXY_DIR"
"""The proxy's private folder (socket, log), set by its owner: removed here if the owner died."""

_stop = threading.Event()
_owner_gone = threading.Event()


def _on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    # Only until proxy.py installs its own handler (sys.exit) after setup: raising in the middle
    # of setup would leave the acceptors it already forked running, with no `shutdown`.
    _stop.set()


def _watch_owner() -> None:
    """Block until the owner's end of stdin closes, then stop (and, past the bound, kill) us."""
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass
    _owner_gone.set()
    _stop.set()
    with contextlib.suppress(ProcessLookupError):
        os.kill(os.getpid(), signal.SIGTERM)  # proxy.py's handler, once set up, exits `Proxy` cleanly
    threading.Event().wait(STOP_TIMEOUT_S)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _die_with_parent() -> None:
    """In each forked acceptor or worker: die with this process, even if it is SIGKILLed."""
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # died between the fork and the prctl
        os._exit(1)


def main() -> None:
    signal.signal(signal.SIGTERM, _on_sigterm)
    os.register_at_fork(after_in_child=_die_with_parent)
    threading.Thread(target=_watch_owner, name="openenv-egress-owner", daemon=True).start()
    from proxy import Proxy

    try:
        with contextlib.suppress(KeyboardInterrupt), Proxy(sys.argv[1:]):
            while not _stop.wait(1):
                pass
    finally:
        folder = os.environ.get(FOLDER_ENV)
        if _owner_gone.is_set() and folder:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
