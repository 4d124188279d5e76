"""What a sandboxed command may reach on the network: nothing, unless it is given an `Egress`.

Every command runs in a network namespace of its own (its loopback only: no host port, no host
abstract unix socket, no resolver). An `Egress` opens exactly two kinds of path out of it:

- **endpoints** (`Endpoint(host, port)`): a fixed address, such as the interception server an
  agent program's model calls go to. Inside the sandbox it is `127.0.0.1:<port>` (10000 + a port below 1024); a relay
  (`_relay.py`, in the sandbox) carries each connection over a unix socket bound into the
  sandbox to a forwarder here, on the trusted side, which connects to that one address and
  nowhere else, whatever the bytes say.
- **allow** (host names, see `_allowlist`): an HTTP(S) proxy ([proxy.py](https://pypi.org/project/proxy.py/)
  with the allowlist plugin `_proxy_plugin`), reached the same way at `127.0.0.1:3128` and named
  in `HTTP_PROXY`/`HTTPS_PROXY`. It resolves names itself, refuses IP literals, names off the
  list and names that resolve to internal addresses (169.254.169.254 included). The sandbox has
  no resolver, so a name made of data (DNS exfiltration) has no way out.

One proxy process serves each distinct allowlist, started on first use and kept for the life of
the server (its stdin is a pipe only the server holds: when the server dies, however it dies, the
proxy sees end of file and stops, see `_egress_proxy`); forwarders live as long as one command.
`Egress.from_manifest` reads a manifest's `network` section for a phase: `agent` (tool commands
and agent programs) gets `network.allow`, `grading` gets `network.grading_allow` (none by default).

An agent program's endpoint comes from its launch: `AgentHost` runs the program inside
`launch_egress(...)`, and `Sandbox.run(..., network=True)` adds that launch's endpoints to the
sandbox's own egress.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import SandboxError
from ._allowlist import is_ip_literal, parse_allow
from ._egress_proxy import FOLDER_ENV

if TYPE_CHECKING:
    from ..manifest import Network as ManifestNetwork

__all__ = [
    "EGRESS_PINS_ENV", "Egress", "EgressPlan", "Endpoint", "current_launch_egress", "egress_plan", "launch_egress",
    "operator_pins", "relay_url",
]  # fmt: skip

PROXY_PORT = 3128
"""Where the allowlist proxy is inside the sandbox (`127.0.0.1:3128`, or the next port an endpoint left free)."""
NET_DIR = "/run/openenv-net"
PROXY_DIR = "/run/openenv-proxy"
RELAY_TARGET = "/run/openenv-relay.py"
RELAY_SOURCE = Path(__file__).with_name("_relay.py")
PROXY_START_TIMEOUT_S = 20.0
CONNECT_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64
"""Connections one command's forwarder carries at once; more are closed at once."""


class Endpoint(BaseModel):
    """One address a command may reach, at `127.0.0.1:<port>` inside the sandbox."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = Field(min_length=1, description="Host name or address, resolved and reached on the trusted side.")
    port: int = Field(ge=1, le=65535, description="Its TCP port; also the port inside the sandbox.")


class Egress(BaseModel):
    """What one sandboxed command may reach beyond its own loopback (nothing by default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoints: tuple[Endpoint, ...] = Field(default=(), description="Fixed addresses, relayed to 127.0.0.1:<port> inside.")
    allow: tuple[str, ...] = Field(default=(), description="Host names (optionally `:port`, or `*.suffix`) reachable through the proxy.")
    pins: Mapping[str, str] = Field(
        default_factory=dict,
        description="Name -> address the proxy uses as given, unchecked (operator-set: a local mirror, a test server).",
    )

    @field_validator("allow")
    @classmethod
    def _valid_allow(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        parse_allow(value)  # raises ValueError naming the bad entry
        return tuple(dict.fromkeys(value))

    @property
    def empty(self) -> bool:
        return not self.endpoints and not self.allow

    def merged(self, other: Egress | None) -> Egress:
        """This egress and `other`'s together."""
        if other is None or other.empty:
            return self
        return Egress(
            endpoints=tuple(dict.fromkeys([*self.endpoints, *other.endpoints])),
            allow=(*self.allow, *other.allow),
            pins={**self.pins, **other.pins},
        )

    def inside_ports(self) -> tuple[list[tuple[Endpoint, int]], int]:
        """Each endpoint with its port inside the sandbox (`inside_port`, or the next free one
        when two endpoints share it), and the proxy's (3128, or the next free one)."""
        taken: set[int] = set()
        out: list[tuple[Endpoint, int]] = []
        for endpoint in self.endpoints:
            port = inside_port(endpoint.port)
            while port in taken:
                port = port + 1 if port < 65535 else 1024
            taken.add(port)
            out.append((endpoint, port))
        proxy = PROXY_PORT
        while proxy in taken:
            proxy += 1
        return out, proxy

    @classmethod
    def from_manifest(cls, section: ManifestNetwork, *, phase: Literal["agent", "grading"]) -> Egress:
        """The egress a manifest's `network` section gives a phase: `agent` (tool commands and
        agent programs) its `allow`, `grading` its `grading_allow`; with the operator's pins
        (`EGRESS_PINS_ENV`) for the names on that list.

        Raises:
            ValueError: `EGRESS_PINS_ENV` is set but not a JSON object of names to addresses.
        """
        hosts = section.allow if phase == "agent" else section.grading_allow
        return cls(allow=tuple(hosts), pins=operator_pins(EGRESS_PINS_ENV, hosts))


EGRESS_PINS_ENV = "OPENENV_EGRESS_PINS"
"""The operator's pins for manifest egress: JSON `{"pypi.org": "10.0.0.5", ...}` in the server's
environment, for a mirror (or a network that routes a listed name through an internal address):
the proxy uses a pinned address as given instead of refusing a name that resolves to an internal
one. Only names on the phase's list count; the agent never sets the server's environment."""


def operator_pins(variable: str, allow: Iterable[str]) -> dict[str, str]:
    """The pins in environment variable `variable` for the names in `allow` (lower-cased).

    Raises:
        ValueError: the variable is not a JSON object of host names to IP addresses.
    """
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return {}
    try:
        pins = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"${variable} is not JSON: {e}") from None
    if not isinstance(pins, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and is_ip_literal(v) for k, v in pins.items()
    ):
        raise ValueError(f"${variable} must be a JSON object of host names to IP addresses")
    names = {entry.rsplit(":", 1)[0].lower() for entry in allow}
    return {name.lower(): address for name, address in pins.items() if name.lower() in names}


def inside_port(port: int) -> int:
    """Where an endpoint on `port` is inside the sandbox: the same port, or 10000 + a privileged
    one (the relay runs as the session's user, who cannot bind below 1024)."""
    return port if port >= 1024 else 10000 + port


def relay_url(url: str) -> tuple[Endpoint, str]:
    """The endpoint an `http(s)://` URL names and the URL as a sandboxed command reaches it:
    `127.0.0.1:<inside_port(port)>` (`localhost` stays `localhost`, which the sandbox's
    `/etc/hosts` maps to 127.0.0.1, so a certificate for it still matches).

    Raises:
        ValueError: not an `http://` or `https://` URL with a host.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"only an http:// or https:// URL with a host can be relayed, got {url!r}")
    endpoint = Endpoint(host=parts.hostname, port=parts.port or (443 if parts.scheme == "https" else 80))
    name = "localhost" if parts.hostname == "localhost" else "127.0.0.1"
    inside = f"{name}:{inside_port(endpoint.port)}"
    return endpoint, urlunsplit((parts.scheme, inside, parts.path, parts.query, parts.fragment))


# --- an agent launch's egress ---------------------------------------------------------------

_launch: contextvars.ContextVar[Egress | None] = contextvars.ContextVar("openenv_launch_egress", default=None)


@contextlib.contextmanager
def launch_egress(egress: Egress) -> Iterator[None]:
    """Within this block (this thread or task), `Sandbox.run(..., network=True)` adds `egress`."""
    token = _launch.set(egress)
    try:
        yield
    finally:
        _launch.reset(token)


def current_launch_egress() -> Egress | None:
    """The egress of the agent launch being run here, if any."""
    return _launch.get()


# --- the trusted side: forwarders and proxies -------------------------------------------------


def _private_dir(prefix: str) -> Path:
    """A folder only root writes, which the sandbox user may traverse (0711)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(folder, 0o711)
    return folder


def _unix_listener(path: Path) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o666)  # the sandbox user connects; the folder keeps everyone else from replacing it
    listener.listen(MAX_CONNECTIONS)
    return listener


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                sock.shutdown(how)


class _Forwarder:
    """A unix socket whose every connection goes to one `endpoint`, and nowhere else."""

    def __init__(self, path: Path, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._listener = _unix_listener(path)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._accept_loop, name=f"openenv-egress-{endpoint.port}", daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if not self._slots.acquire(blocking=False):
                client.close()
                continue
            threading.Thread(target=self._carry, args=(client,), daemon=True).start()

    def _carry(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            upstream = socket.create_connection((self.endpoint.host, self.endpoint.port), timeout=CONNECT_TIMEOUT_S)
            upstream.settimeout(None)
            with self._lock:
                if self._closed:
                    return
                self._open.update((client, upstream))
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(client)
                if upstream is not None:
                    self._open.discard(upstream)
            for sock in (client, upstream):
                if sock is not None:
                    sock.close()
            self._slots.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            live = list(self._open)
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        self._listener.close()
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)


@dataclass
class _Proxy:
    """One allowlist proxy process (proxy.py with `_proxy_plugin`), listening on a unix socket."""

    folder: Path
    process: subprocess.Popen[bytes]
    log: Path
    owner: int = field(default_factory=os.getpid)
    """The process that started it (and holds its stdin): a forked child starts its own."""

    @property
    def socket_path(self) -> Path:
        return self.folder / "proxy.sock"


_proxies: dict[str, _Proxy] = {}
_proxies_lock = threading.Lock()


def _start_proxy(allow: tuple[str, ...], pins: Mapping[str, str]) -> _Proxy:
    folder = _private_dir("openenv-egress-proxy-")
    log = folder / "proxy.log"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join(sys.path),
        "OPENENV_EGRESS_POLICY": json.dumps({"allow": list(allow), "pins": dict(pins)}),
        FOLDER_ENV: str(folder),  # the proxy removes it if we die first
    }
    argv = [
        sys.executable, "-m", "openenv_sdk.sandbox._egress_proxy",
        "--unix-socket-path", str(folder / "proxy.sock"),
        "--plugins", "openenv_sdk.sandbox._proxy_plugin.AllowlistPlugin",
        "--num-acceptors", "1", "--num-workers", "1", "--log-level", "ERROR",  # not a line per refusal
    ]  # fmt: skip
    # stdin: our lifeline to it (end of file stops the proxy); never written to
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv, env=env, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, cwd="/", start_new_session=True
        )
    proxy = _Proxy(folder=folder, process=process, log=log)
    deadline = time.monotonic() + PROXY_START_TIMEOUT_S
    while not proxy.socket_path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            _stop_proxy(proxy)
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise SandboxError(f"the egress proxy did not start within {PROXY_START_TIMEOUT_S} s: {tail}")
        time.sleep(0.02)
    os.chmod(proxy.socket_path, 0o666)
    return proxy


def _stop_proxy(proxy: _Proxy) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proxy.process.pid, signal.SIGTERM)
    try:
        proxy.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proxy.process.pid, signal.SIGKILL)
        proxy.process.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proxy.process.pid, signal.SIGKILL)  # its acceptor processes
    if proxy.process.stdin is not None:
        proxy.process.stdin.close()
    shutil.rmtree(proxy.folder, ignore_errors=True)


def proxy_for(allow: tuple[str, ...], pins: Mapping[str, str]) -> _Proxy:
    """The running proxy for this allowlist (started on first use, restarted if it died)."""
    key = json.dumps([sorted(allow), sorted(pins.items())])
    with _proxies_lock:
        proxy = _proxies.get(key)
        if proxy is None or proxy.owner != os.getpid() or proxy.process.poll() is not None:
            if proxy is not None and proxy.owner == os.getpid():
                _stop_proxy(proxy)
            proxy = _proxies[key] = _start_proxy(allow, pins)
        return proxy


@atexit.register
def stop_proxies() -> None:
    """Stop every proxy this process started (not those a forked child inherited in `_proxies`)."""
    with _proxies_lock:
        for proxy in _proxies.values():
            if proxy.owner == os.getpid():
                _stop_proxy(proxy)
        _proxies.clear()


# --- one command's plan -----------------------------------------------------------------------


@dataclass
class EgressPlan:
    """What `Sandbox.run` adds to one command: read-only binds, an argv prefix, variables."""

    binds: list[tuple[Path, str]] = field(default_factory=list)
    prefix: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def egress_plan(egress: Egress) -> Iterator[EgressPlan]:
    """Forwarders and proxy for one command under bubblewrap; closed when the block ends."""
    plan = EgressPlan()
    if egress.empty:
        yield plan
        return
    specs: list[str] = []
    forwarders: list[_Forwarder] = []
    folder: Path | None = None
    try:
        ports, proxy_port = egress.inside_ports()
        if egress.endpoints:
            folder = _private_dir("openenv-egress-")
            plan.binds.append((folder, NET_DIR))
            for i, (endpoint, port) in enumerate(ports):
                forwarders.append(_Forwarder(folder / f"{i}.sock", endpoint))
                specs.append(f"{port}={NET_DIR}/{i}.sock")
        if egress.allow:
            proxy = proxy_for(egress.allow, egress.pins)
            plan.binds.append((proxy.folder, PROXY_DIR))
            specs.append(f"{proxy_port}={PROXY_DIR}/proxy.sock")
            url = f"http://127.0.0.1:{proxy_port}"
            plan.env.update({"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url})
            plan.env.update({"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
        plan.binds.append((RELAY_SOURCE, RELAY_TARGET))
        plan.prefix = [sys.executable, "-I", "-S", RELAY_TARGET, *specs, "--"]
        yield plan
    finally:
        for forwarder in forwarders:
            forwarder.close()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
