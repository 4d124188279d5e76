"""A process that owns an egress proxy, for tests/sandbox/test_proxy_lifetime.py (run as a script).

    python proxy_owner.py starting   # print the proxy's pid as soon as it is spawned, then wait
    python proxy_owner.py running    # a real sandbox command through the proxy; print its pids, wait
    python proxy_owner.py exit       # the same, then close the sandbox and exit normally
    python proxy_owner.py thread     # start it from a thread that ends; report whether it lived on

Each prints one JSON line: {"proxy": pid, "children": [...], "folder": path, ...}.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from openenv_sdk.sandbox import Egress, Sandbox
from openenv_sdk.sandbox._network import proxy_for

EGRESS = Egress(allow=("allowed.openenv.test:80",))


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def is_proxy(pid: int) -> bool:
    try:
        return b"openenv_sdk.sandbox._egress_proxy" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def report(**extra: object) -> None:
    proxy = proxy_for(EGRESS.allow, EGRESS.pins)
    print(
        json.dumps({"proxy": proxy.process.pid, "children": children(proxy.process.pid), "folder": str(proxy.folder), **extra}),
        flush=True,
    )


def main(mode: str) -> None:
    if mode == "starting":
        threading.Thread(target=proxy_for, args=(EGRESS.allow, EGRESS.pins), daemon=True).start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            spawned = [pid for pid in children(os.getpid()) if is_proxy(pid)]
            if spawned:
                print(json.dumps({"proxy": spawned[0], "children": [], "folder": None}), flush=True)
                break
            time.sleep(0.001)
        time.sleep(60)
    elif mode == "thread":

        def one_command() -> None:
            with Sandbox(name="proxy-owner", network=EGRESS) as sandbox:
                sandbox.run("true", network=EGRESS)

        worker = threading.Thread(target=one_command)
        worker.start()
        worker.join()
        pid = proxy_for(EGRESS.allow, EGRESS.pins).process.pid  # the one the thread's command started
        time.sleep(2)  # the old PR_SET_PDEATHSIG fired at once when the starting thread ended
        report(first=pid)
    else:
        with Sandbox(name="proxy-owner", network=EGRESS) as sandbox:
            result = sandbox.run("true", network=EGRESS)
            assert result.exit_code == 0, result.render()
            report()
        if mode == "running":
            time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1])
