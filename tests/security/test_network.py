"""Network attacks from sandboxed commands and agent programs: each reaches nothing it was not given.

Real sandboxes (bubblewrap), real sockets, a real `openenv serve` of the terminal environment for
`run_agent`, a real HTTP server standing for the interception server, and the real allowlist
proxy. Nothing here sends traffic off this machine: every address probed is refused inside the
sandbox's own network namespace (no route) or by the proxy before it connects.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from openenv_sdk.agents import AgentLaunch, AgentRun, AgentSpec
from openenv_sdk.agents.host import model_egress_of
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.manifest import Manifest
from openenv_sdk.sandbox import Egress, Endpoint, Sandbox, SandboxLimits

TERMINAL_DIR = Path(__file__).resolve().parents[2] / "environments" / "terminal"
KEY = "sk-net-" + uuid.uuid4().hex
METADATA = "169.254.169.254"

# The probe an attacking agent program runs: every way out it can think of, one JSON line each.
PROBE = r'''
import json, os, socket, sys, urllib.request

def tcp(host, port, timeout=3):
    try:
        s = socket.create_connection((host, port), timeout=timeout); s.close(); return "connected"
    except OSError as e:
        return f"refused: {e}"

def abstract(name):
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect("\0" + name); s.close(); return "connected"
    except OSError as e:
        return f"refused: {e}"

def dns(name):
    try:
        return f"resolved: {socket.getaddrinfo(name, 80)[0][4][0]}"
    except OSError as e:
        return f"refused: {e}"

def udp_dns():
    try:
        server = next(l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver"))
    except (OSError, StopIteration):
        return "refused: no resolver configured"
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
        s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x06secret\x07example\x03com\x00\x00\x01\x00\x01", (server, 53))
        s.recv(512); return "answered"
    except OSError as e:
        return f"refused: {e}"

def model():
    url = os.environ["OPENAI_BASE_URL"] + "/models"
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return f"ok {r.status} {r.read().decode()}"
    except Exception as e:
        return f"failed: {e}"

a = json.loads(sys.argv[1])
out = {
    "model": model(),
    "server_api": tcp("127.0.0.1", a["server_port"]),
    "other_port": tcp("127.0.0.1", a["other_port"]),
    "host_ip": tcp(a["host_ip"], a["other_port"]),
    "metadata": tcp("169.254.169.254", 80),
    "abstract": abstract(a["abstract"]),
    "dns": dns("example.com"),
    "udp_dns": udp_dns(),
}
print("PROBE " + json.dumps(out))
'''


class _ModelAPI(http.server.BaseHTTPRequestHandler):
    """Stands for the interception server: answers GET /v1/models."""

    def do_GET(self) -> None:
        body = json.dumps({"data": [{"id": "policy"}], "auth": self.headers.get("Authorization") == f"Bearer {KEY}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def model_api() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ModelAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def other_port() -> Iterator[int]:
    """A listening port on the host, on every address (loopback and the host's own)."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", 0))
    listener.listen(8)
    yield listener.getsockname()[1]
    listener.close()


@pytest.fixture(scope="module")
def abstract_socket() -> Iterator[str]:
    name = f"openenv-test-{uuid.uuid4().hex}"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind("\0" + name)
    listener.listen(8)
    yield name
    listener.close()


def _host_ip() -> str:
    """This machine's own non-loopback address (a raw IP that is the host itself)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet: UDP connect only picks the route's source address
        return str(s.getsockname()[0])


def _probe_result(stdout: str) -> dict[str, str]:
    line = next(line for line in stdout.splitlines() if line.startswith("PROBE "))
    return json.loads(line.removeprefix("PROBE "))


@pytest.fixture(scope="module")
def terminal() -> Iterator[GenericEnvClient]:
    with GenericEnvClient(env_dir=TERMINAL_DIR, timeout_s=90, startup_timeout_s=120) as client:
        yield client


def test_an_agent_program_reaches_its_model_endpoint_and_nothing_else_of_the_host(
    terminal: GenericEnvClient, model_api: int, other_port: int, abstract_socket: str
) -> None:
    """An agent program run by run_agent probes the server's API, host ports, the host's IP, a host abstract socket, the metadata address and DNS: only its model endpoint answers."""
    assert terminal.base_url is not None
    server_port = int(terminal.base_url.rsplit(":", 1)[1])
    args = {"server_port": server_port, "other_port": other_port, "host_ip": _host_ip(), "abstract": abstract_socket}
    spec = AgentSpec(name="net-probe", files={".probe.py": PROBE}, run=f"python3 \"$HOME/.probe.py\" '{json.dumps(args)}'")
    terminal.reset(task_id="clean_tmp_files")
    launch = AgentLaunch(spec=spec, base_url=f"http://localhost:{model_api}/v1", api_key=KEY)  # type: ignore[arg-type]
    run = AgentRun.model_validate(terminal.call("run_agent", launch=launch.to_wire()))
    assert run.ok, run
    out = _probe_result(run.stdout_tail)
    assert out["model"].startswith("ok 200") and '"auth": true' in out["model"], out["model"]
    for probe in ("server_api", "other_port", "host_ip", "metadata", "abstract", "dns", "udp_dns"):
        assert out[probe].startswith("refused"), (probe, out[probe])
    # the control: the same probes from the test (the host) do connect
    with socket.create_connection(("127.0.0.1", server_port), timeout=3), socket.create_connection(("127.0.0.1", other_port), timeout=3):
        pass
    with socket.socket(socket.AF_UNIX) as s:
        s.connect("\0" + abstract_socket)


@pytest.mark.skipif(
    os.environ.get("OPENENV_TEST_CONTAINERS") != "1",
    reason="needs a container engine: set OPENENV_TEST_CONTAINERS=1 (after scripts/setup_container_engine.sh)",
)
def test_from_the_image_an_agent_program_reaches_its_model_endpoint_and_nothing_else() -> None:
    """The same probe from the terminal image under DockerProvider: the model endpoint (on the host, through the container's gateway) answers; the server's port, the gateway's other ports, the metadata address and DNS do not."""
    from openenv_sdk.build import build_image
    from openenv_sdk.providers import DockerProvider

    base = os.environ.get("OPENENV_BASE_IMAGE", "localhost/openenv-base:bookworm")
    tag = build_image(TERMINAL_DIR, tag="openenv-attack-terminal:test", base_image=base, output="quiet")
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), _ModelAPI)  # the container reaches the host at its gateway
    threading.Thread(target=server.serve_forever, daemon=True).start()
    other = socket.socket()
    other.bind(("0.0.0.0", 0))
    other.listen(8)
    try:
        with DockerProvider(tag, startup_timeout_s=120) as provider:
            provider.start()
            gateway = provider.host_address
            assert gateway is not None
            args = {"server_port": 8000, "other_port": other.getsockname()[1], "host_ip": gateway, "abstract": "openenv-none"}
            spec = AgentSpec(name="net-probe", files={".probe.py": PROBE}, run=f"python3 \"$HOME/.probe.py\" '{json.dumps(args)}'")
            with GenericEnvClient(provider=provider, timeout_s=90) as env:
                env.reset(task_id="clean_tmp_files")
                launch = AgentLaunch(spec=spec, base_url=f"http://{gateway}:{server.server_address[1]}/v1", api_key=KEY)  # type: ignore[arg-type]
                run = AgentRun.model_validate(env.call("run_agent", launch=launch.to_wire()))
    finally:
        server.shutdown()
        server.server_close()
        other.close()
    assert run.ok, run
    out = _probe_result(run.stdout_tail)
    assert out["model"].startswith("ok 200") and '"auth": true' in out["model"], out["model"]
    for probe in ("server_api", "other_port", "host_ip", "metadata", "dns", "udp_dns"):
        assert out[probe].startswith("refused"), (probe, out[probe])


def test_the_agent_program_cannot_create_a_session_on_the_server_api(terminal: GenericEnvClient) -> None:
    """An agent program posts to the server's reset endpoint on 127.0.0.1 (the attack that got 201 when it shared the host's network): no connection."""
    assert terminal.base_url is not None
    terminal.reset(task_id="clean_tmp_files")
    attack = (
        "python3 -c \"import urllib.request,sys; "
        f"r=urllib.request.urlopen(urllib.request.Request('{terminal.base_url}/reset', data=b'{{}}', "
        "headers={'Content-Type': 'application/json'}), timeout=5); print('STATUS', r.status)\""
    )
    spec = AgentSpec(name="api-attack", run=attack)
    launch = AgentLaunch(spec=spec, base_url="http://127.0.0.1:9/v1", api_key=KEY)  # type: ignore[arg-type]
    run = AgentRun.model_validate(terminal.call("run_agent", launch=launch.to_wire()))
    assert run.exit_code != 0 and "STATUS" not in run.stdout_tail and "Connection refused" in run.stderr_tail, run


def test_tool_commands_have_no_network(terminal: GenericEnvClient, model_api: int) -> None:
    """A tool command (not an agent program) tries the model endpoint the launches use: it has none."""
    terminal.reset(task_id="clean_tmp_files")
    out = terminal.call_tool("bash", command=f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {model_api}), timeout=3)\" 2>&1 | tail -1")
    assert "Connection refused" in str(out)


def test_the_endpoint_relay_goes_to_its_endpoint_whatever_the_bytes_say(model_api: int, other_port: int) -> None:
    """Through the relayed model endpoint, a command asks for another host port (CONNECT, an absolute URL, a Host header): every byte still lands on the model endpoint."""
    endpoint, inside = model_egress_of(f"http://127.0.0.1:{model_api}/v1")
    port = int(inside.split(":")[2].split("/")[0])
    script = (
        "import socket\n"
        f"for req in (b'CONNECT 127.0.0.1:{other_port} HTTP/1.1\\r\\n\\r\\n', b'GET http://127.0.0.1:{other_port}/ HTTP/1.1\\r\\nHost: 127.0.0.1:{other_port}\\r\\nConnection: close\\r\\n\\r\\n'):\n"
        f"    s = socket.create_connection(('127.0.0.1', {port}), timeout=5); s.sendall(req); print(s.recv(200)); s.close()\n"
    )
    with Sandbox(limits=SandboxLimits(timeout_s=30), name="net-relay") as sandbox:
        result = sandbox.run(["python3", "-c", script], network=endpoint)
    assert result.exit_code == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert "501" in first and "Unsupported method ('CONNECT')" in first  # the model API's own answer
    assert "HTTP/1.0 501" in first and "HTTP/1.0 200" in second and "application/json" in second  # the model API answered both


def test_model_endpoints_map_to_what_the_sandbox_reaches() -> None:
    """The launch's base_url, as the agent program gets it: http and https to localhost or an address relayed, https to a name through the proxy; a name is never relayed as an address the agent picks."""
    egress, url = model_egress_of("http://10.88.0.1:8123/v1")
    assert (egress.endpoints, egress.allow, url) == ((Endpoint(host="10.88.0.1", port=8123),), (), "http://127.0.0.1:8123/v1")
    egress, url = model_egress_of("https://localhost:443/v1")
    assert (egress.endpoints, url) == ((Endpoint(host="localhost", port=443),), "https://localhost:10443/v1")
    egress, url = model_egress_of("http://trainer.internal:80/v1")
    assert (egress.endpoints, url) == ((Endpoint(host="trainer.internal", port=80),), "http://127.0.0.1:10080/v1")
    name = socket.gethostname()
    egress, url = model_egress_of(f"https://{name}/v1")
    assert (egress.endpoints, egress.allow, url) == ((), (f"{name}:443",), f"https://{name}/v1")
    assert egress.pins[name.lower()] == socket.getaddrinfo(name, 443, type=socket.SOCK_STREAM)[0][4][0]


# --- the allowlist proxy, per phase ------------------------------------------------------------


class _Named(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"allowed host says hi"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def allowed_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Named)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _manifest_egress(port: int, phase: str) -> Egress:
    manifest = Manifest.model_validate(
        {"name": "net", "network": {"policy": "allowlist", "allow": [f"example-allowed-host:{port}"]}}
    )
    egress = Egress.from_manifest(manifest.network, phase=phase)  # type: ignore[arg-type]
    # the test's resolver hook: the operator pins the allowed name to the local server
    return egress.model_copy(update={"pins": {"example-allowed-host": "127.0.0.1"}}) if egress.allow else egress


CURL = "curl -sS -m 5 --noproxy '' -o /dev/null -w '%{{http_code}}' {url}; echo ' ='$?"
"""Through the proxy when one is set, loopback included (`--noproxy ''` overrides NO_PROXY)."""


def _curl(sandbox: Sandbox, url: str, egress: Egress | bool = False) -> str:
    result = sandbox.run(CURL.format(url=url), network=egress)
    return (result.stdout + result.stderr).strip()


def test_the_allowlist_lets_through_only_allowed_names(allowed_server: int) -> None:
    """Through the allowlist proxy: an allowed name works; another name, a raw IP, a decimal IP, the metadata address and an allowed name on another port are refused (403, nothing connected)."""
    egress = _manifest_egress(allowed_server, "agent")
    with Sandbox(limits=SandboxLimits(timeout_s=30), name="net-allow", network=egress) as sandbox:
        assert _curl(sandbox, f"http://example-allowed-host:{allowed_server}/").startswith("200")
        https = sandbox.run(f"curl -sS -m 5 -p https://example-allowed-host:{allowed_server}/ -o /dev/null; echo =$?")
        assert "=35" in https.stdout or "SSL" in https.stderr  # the tunnel opened (the server speaks no TLS)
        for url in (
            f"http://not-allowed.example:{allowed_server}/",
            f"http://127.0.0.1:{allowed_server}/",
            f"http://2130706433:{allowed_server}/",
            f"http://0x7f.1:{allowed_server}/",
            f"http://[::1]:{allowed_server}/",
            f"http://[::ffff:127.0.0.1]:{allowed_server}/",
            f"http://{METADATA}/latest/meta-data/",
            "http://example-allowed-host:80/",
        ):
            assert _curl(sandbox, url).startswith("403"), url
        for target in (f"not-allowed.example:{allowed_server}", f"{METADATA}:80", f"127.0.0.1:{allowed_server}"):
            tunnel = sandbox.run(f"curl -sS -m 5 --noproxy '' -p https://{target}/ -o /dev/null 2>&1; echo =$?")
            assert "403" in tunnel.stdout and "=56" in tunnel.stdout, (target, tunnel.stdout)
        # bypassing the proxy: direct connections and DNS have nowhere to go
        direct = sandbox.run(f"curl -sS -m 5 --noproxy '*' http://example-allowed-host:{allowed_server}/ 2>&1; echo =$?")
        assert "=6" in direct.stdout  # could not resolve: no resolver in the sandbox
        raw = sandbox.run(f"curl -sS -m 5 --noproxy '*' http://{METADATA}/ 2>&1; echo =$?")
        assert "=7" in raw.stdout  # could not connect: no route


def test_grading_has_no_network_by_default(allowed_server: int, model_api: int) -> None:
    """The grading phase of the same manifest: no proxy, no endpoint, nothing."""
    assert _manifest_egress(allowed_server, "grading").empty
    with Sandbox(limits=SandboxLimits(timeout_s=30), name="net-grade", network=_manifest_egress(allowed_server, "grading")) as grading:
        env = grading.run("env | grep -ci proxy; true")
        assert env.stdout.strip() == "0"
        assert _curl(grading, f"http://example-allowed-host:{allowed_server}/", True).startswith("000 =6")  # no resolver
        assert _curl(grading, f"http://127.0.0.1:{model_api}/v1/models", True).startswith("000 =7")  # nothing listens


def test_a_name_resolving_to_an_internal_address_is_refused(allowed_server: int) -> None:
    """DNS rebinding: an allowed name that resolves to loopback (here `localhost.`-style, no pin) is refused by the proxy."""
    egress = Egress(allow=(f"rebind.openenv.test:{allowed_server}",))
    from openenv_sdk.sandbox._allowlist import EgressRefused, check_request, parse_allow

    rules = parse_allow(egress.allow)
    def resolver(*addresses: str) -> Callable[[str, int], list[str]]:
        return lambda _host, _port: list(addresses)

    for address in ("127.0.0.1", METADATA, "10.1.2.3", "fd00::1", "::ffff:127.0.0.1", "100.64.0.1", "0.0.0.0"):
        with pytest.raises(EgressRefused, match="not a public address"):
            check_request("rebind.openenv.test", allowed_server, rules, resolve=resolver("93.184.215.14", address))
    assert check_request("rebind.openenv.test", allowed_server, rules, resolve=resolver("93.184.215.14")) == "93.184.215.14"

    def never(host: str, port: int) -> list[str]:
        raise AssertionError(f"resolved {host}, which is not on the list")

    with pytest.raises(EgressRefused, match="not on the network allowlist"):
        check_request("secret-data.attacker.example", 443, rules, resolve=never)


def test_bad_allowlist_entries_are_refused_with_the_reason() -> None:
    for entry, reason in (("1.2.3.4", "IP address"), ("[::1]:443", "IP address"), ("localhost", "this machine"), ("*", "not a host name"), ("pypi.org:99999", "port")):
        with pytest.raises(ValueError, match=reason):
            Egress(allow=(entry,))


def test_relay_cost_per_command(model_api: int) -> None:
    """Not an attack: the per-command cost of the endpoint relay (printed; bounded loosely)."""
    endpoint = Egress(endpoints=(Endpoint(host="127.0.0.1", port=model_api),))
    with Sandbox(limits=SandboxLimits(timeout_s=30), name="net-cost") as sandbox:
        for _ in range(2):
            sandbox.run(["true"]), sandbox.run(["true"], network=endpoint)

        def median_s(egress: Egress | bool) -> float:
            times = []
            for _ in range(15):
                start = time.perf_counter()
                assert sandbox.run(["true"], network=egress).exit_code == 0
                times.append(time.perf_counter() - start)
            return sorted(times)[len(times) // 2]

        plain, relayed = median_s(False), median_s(endpoint)
    print(f"sandboxed true: {plain * 1000:.1f} ms; with the endpoint relay: {relayed * 1000:.1f} ms")
    assert relayed < plain + 0.5
