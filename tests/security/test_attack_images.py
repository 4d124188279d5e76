"""Attacks on the images `openenv build` makes, run as `DockerProvider` starts them.

The coding and terminal images are built with the generated Dockerfile (bubblewrap installed)
and started by `DockerProvider` (the capabilities it gives sandboxed environments, nothing
more). Two kinds of attack:

- through the `Sandbox` package inside the running container (`docker exec` of a Python
  snippet holding two sessions' sandboxes): what the container lets bubblewrap guarantee,
  whatever the environments do with it;
- through the real clients (`GenericEnvClient`, MCP tool calls): one session's agent against
  another's, against the server, and against what the image must not hold.

Each test fails if its attack works. Needs a container engine: OPENENV_TEST_CONTAINERS=1.
"""

from __future__ import annotations

import json
import os
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv_sdk.build import build_image
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.providers import DockerProvider
from openenv_sdk.providers.docker import SANDBOX_CAPABILITIES

ROOT = Path(__file__).resolve().parents[2]
TEST_BASE_IMAGE = os.environ.get("OPENENV_BASE_IMAGE", "localhost/openenv-base:bookworm")  # as tests/containers
# name -> (reset arguments, the tool that runs a shell command)
ENVIRONMENTS = {
    "coding": ({}, "run_shell"),
    "terminal": ({"task_id": "count_log_files"}, "bash"),
}

pytestmark = pytest.mark.skipif(
    os.environ.get("OPENENV_TEST_CONTAINERS") != "1",
    reason="needs a container engine: set OPENENV_TEST_CONTAINERS=1 (after scripts/setup_container_engine.sh)",
)


@pytest.fixture(scope="module", params=sorted(ENVIRONMENTS))
def running(request: pytest.FixtureRequest) -> Iterator[tuple[str, DockerProvider]]:
    """The environment's image, built and started by DockerProvider (one container per module and image)."""
    name = request.param
    tag = build_image(ROOT / "environments" / name, tag=f"openenv-attack-{name}:test", base_image=TEST_BASE_IMAGE,
                      output="quiet")  # fmt: skip
    with DockerProvider(tag, startup_timeout_s=120) as provider:
        provider.start()
        yield name, provider


def _client(provider: DockerProvider) -> GenericEnvClient:
    assert provider.base_url is not None
    token = getattr(provider, "orchestrator_token", None)
    return GenericEnvClient(base_url=provider.base_url, **({"orchestrator_token": token} if token else {}))


def _exec(provider: DockerProvider, argv: list[str]) -> tuple[int, str]:
    import docker

    client = docker.from_env()
    try:
        assert provider.container_id is not None
        result = client.containers.get(provider.container_id).exec_run(argv, demux=False)
        return result.exit_code, (result.output or b"").decode(errors="replace")
    finally:
        client.close()


def _text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def _shell(env: GenericEnvClient, tool: str, command: str) -> str:
    """The command's output, without the tool's `[exit code N]` line."""
    text = _text(env.call_tool(tool, command=command))
    return "\n".join(line for line in text.splitlines() if not line.startswith("[exit code"))


def _own_processes(ps_output: str) -> list[list[str]]:
    """`ps -e -o pid=,user=,comm=` rows, less bubblewrap's pid 1 (root with no capabilities and
    no-new-privs, which waits for the command: the agent can neither signal nor inspect it)."""
    rows = [line.split() for line in ps_output.strip().splitlines() if line.strip()]
    return [row for row in rows if row[:1] != ["1"] or row[2:] != ["bwrap"]]


# --- the container and the image ------------------------------------------------------------


CAPABILITY_BITS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "KILL": 5, "SETGID": 6, "SETUID": 7, "SETPCAP": 8, "NET_ADMIN": 12, "SYS_ADMIN": 21}


def test_container_gets_exactly_the_sandbox_capabilities(running: tuple[str, DockerProvider]) -> None:
    import docker

    _, provider = running
    code, output = _exec(provider, ["sh", "-c", "grep -E '^Cap(Bnd|Eff)' /proc/1/status"])
    assert code == 0, output
    expected = sum(1 << CAPABILITY_BITS[name] for name in SANDBOX_CAPABILITIES)
    masks = {line.split()[0]: int(line.split()[1], 16) for line in output.splitlines()}
    assert masks == {"CapEff:": expected, "CapBnd:": expected}, output  # the server's, and no more
    client = docker.from_env()
    try:
        assert provider.container_id is not None
        host = client.containers.get(provider.container_id).attrs["HostConfig"]
    finally:
        client.close()
    options = " ".join(host.get("SecurityOpt") or [])
    assert "no-new-privileges" in options
    assert "seccomp=unconfined" not in options and "unmask" not in options and not host.get("Privileged")


def test_health_reports_isolation(running: tuple[str, DockerProvider]) -> None:
    import httpx

    _, provider = running
    body = httpx.get(f"{provider.base_url}/health", timeout=10).json()
    assert body["isolation"]["isolated"] is True
    assert body["isolation"]["mode"] == "bubblewrap"


def test_hidden_files_are_not_in_the_image(running: tuple[str, DockerProvider]) -> None:
    name, provider = running
    hidden = sorted({p.name for p in (ROOT / "environments" / name / "hidden").rglob("*") if p.is_file()})
    assert hidden
    names = " ".join(f"-o -name {json.dumps(n)}" for n in hidden)
    code, output = _exec(provider, ["sh", "-c", f"ls -a /env; echo ---; find /env -name hidden -o -name tests {names}"])
    assert code == 0, output
    listing, found = output.split("---", 1)
    assert "openenv.yaml" in listing.split()  # the environment is there, its hidden parts are not
    assert found.strip() == "", f"in the image: {found}"


# --- the Sandbox package inside the container ------------------------------------------------

SANDBOX_ATTACKS = textwrap.dedent(
    """
    import json, socket, time
    from openenv_sdk.sandbox import Sandbox, SandboxLimits, isolation_mode
    isolation_mode()
    limits = SandboxLimits(timeout_s=20, max_processes=64)
    a, b = Sandbox(limits=limits, name="attack-a"), Sandbox(limits=limits, name="attack-b")
    out = {"uids": [a.run("id -u").stdout.strip(), b.run("id -u").stdout.strip()]}
    a.run("echo top-secret > secret.txt; chmod 600 secret.txt")
    victim = a.popen(["/bin/bash", "-c", "sleep 30"])
    time.sleep(0.5)
    secret = a.workspace / "secret.txt"
    out["read_by_path"] = b.run(f"cat {secret}").stdout
    out["proc_cwd"] = b.run("for p in /proc/[0-9]*; do ls $p/cwd/ 2>/dev/null; done").stdout
    out["ps"] = b.run("ps -e -o pid=,user=,comm=").stdout
    out["pid1"] = b.run("grep -E '^(CapEff|NoNewPrivs)' /proc/1/status").stdout.split()
    out["kill"] = b.run("kill -9 -1; sleep 0.2; echo done").stdout.strip()
    out["victim_alive"] = victim.poll() is None
    out["server_port"] = b.run(
        "python3 -c \\"import socket; socket.create_connection(('127.0.0.1', 8000), 2); print('connected')\\""
    ).stdout.strip()
    with socket.create_connection(("127.0.0.1", 8000), 2):
        out["server_up_outside"] = True
    out["caps"] = b.run("grep -E 'Cap(Eff|Bnd)' /proc/self/status").stdout.split()
    victim.kill()
    a.close(); b.close()
    print(json.dumps(out))
    """
)


def test_sandboxes_in_the_container_isolate_sessions(running: tuple[str, DockerProvider]) -> None:
    _, provider = running
    code, output = _exec(provider, ["/opt/openenv/venv/bin/python", "-c", SANDBOX_ATTACKS])
    assert code == 0, output
    out = json.loads(output.strip().splitlines()[-1])
    assert len(set(out["uids"])) == 2 and "0" not in out["uids"]
    # the container's own uid range: no session uid shared with the host's servers (62000..)
    assert all(int(uid) >= 1_000_000 for uid in out["uids"]), out["uids"]
    assert "top-secret" not in out["read_by_path"]
    assert "secret.txt" not in out["proc_cwd"]
    own = _own_processes(out["ps"])
    assert {comm for _, _, comm in own} <= {"bash", "ps"} and "root" not in {user for _, user, _ in own}, out["ps"]
    assert out["pid1"] == ["CapEff:", "0000000000000000", "NoNewPrivs:", "1"]
    assert out["kill"] == "" or out["victim_alive"]  # kill -9 -1 may end the attacker's own shell
    assert out["victim_alive"]
    assert out["server_port"] == ""  # its 127.0.0.1 is its own
    assert out["server_up_outside"]
    assert out["caps"] == ["CapEff:", "0000000000000000", "CapBnd:", "0000000000000000"]


# --- the same attacks through the agent's tools ------------------------------------------------


def test_a_session_cannot_reach_another_sessions_files_or_processes(running: tuple[str, DockerProvider]) -> None:
    name, provider = running
    task, tool = ENVIRONMENTS[name]
    with _client(provider) as a, _client(provider) as b:
        a.reset(**task)
        b.reset(**task)
        where = _shell(a, tool, "echo top-secret > secret.txt; chmod 600 secret.txt; pwd").strip().splitlines()[-1]
        assert where.startswith("/"), where
        victim: dict[str, str] = {}
        # A's command runs while B attacks; it must finish untouched.
        thread = threading.Thread(target=lambda: victim.update(out=_shell(a, tool, "sleep 6; echo survived")))
        thread.start()
        try:
            seen = _shell(b, tool, "ps -e -o pid=,user=,comm=")
            stolen = _shell(b, tool, f"cat {where}/secret.txt; for p in /proc/[0-9]*; do cat $p/cwd/secret.txt; done")
            _shell(b, tool, "kill -9 -1")
        finally:
            thread.join(timeout=60)
        assert "top-secret" not in stolen
        assert {comm for _, _, comm in _own_processes(seen)} <= {"bash", "ps", "sh"}, seen  # no A's sleep
        assert "survived" in victim.get("out", ""), victim
        assert "top-secret" in _shell(a, tool, "cat secret.txt")


def test_the_server_port_is_unreachable_from_a_tool(running: tuple[str, DockerProvider]) -> None:
    name, provider = running
    task, tool = ENVIRONMENTS[name]
    with _client(provider) as env:
        env.reset(**task)
        out = _shell(
            env,
            tool,
            "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8000), 2); print('CONNECTED')\"; "
            "ip -o addr 2>/dev/null || cat /proc/net/dev",
        )
    assert "CONNECTED" not in out
    assert "eth0" not in out  # only its own loopback: no way to the container's network


def test_ps_shows_only_the_commands_own_processes(running: tuple[str, DockerProvider]) -> None:
    name, provider = running
    task, tool = ENVIRONMENTS[name]
    with _client(provider) as env:
        env.reset(**task)
        out = _shell(env, tool, "ps -e -o pid=,user=,comm=")
    processes = _own_processes(out)
    assert processes, out
    assert all(user != "root" for _, user, _ in processes), out
    assert {comm for _, _, comm in processes} <= {"bash", "ps", "sh"}, out
