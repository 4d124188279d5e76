"""A checkpoint's files are the agent's data: restoring one never writes, links, chmods or chowns
anything outside the session's folders, whatever the checkpoint file holds (a tampered file on
the store's disk, read back by a server started after it) and whatever the agent left in its
folders (a saved shell that is a link or a FIFO). Each attack is refused with `ArchiveRejected`
and nothing of it is written; the victim outside stays as it was."""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv_sdk import Environment, create_app
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.loader import load_environment
from openenv_sdk.regrade import ArchiveRejected
from openenv_sdk.sandbox import Sandbox, remove_tree
from openenv_sdk.server import ServerConfig
from openenv_sdk.snapshots import CheckpointError, pack_folders, rewrite_text, unpack_folders
from openenv_sdk.testing import serve_app

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("work", "home")
MAGIC = b"openenv-snapshot-1\n"
NS = [1_600_000_000_000_000_000, 1_600_000_000_000_000_000]


def raw_archive(*entries: dict[str, Any]) -> bytes:
    """A checkpoint file in the server's format, entry by entry (a file's bytes in `data`)."""
    out = bytearray(MAGIC)
    for entry in entries:
        data = entry.pop("data", b"")
        header = json.dumps({"m": 0o644, "t": NS, **entry}).encode()
        out += len(header).to_bytes(4, "big") + header + data
    return bytes(out)


def f(path: str, data: bytes = b"pwned", **more: Any) -> dict[str, Any]:
    return {"p": path, "k": "f", "s": len(data), "data": data, **more}


def d(path: str) -> list[dict[str, Any]]:
    return [{"p": path, "k": "d", "m": 0o755}, {"p": path, "k": "t"}]


def link(path: str, target: str) -> dict[str, Any]:
    return {"p": path, "k": "l", "l": target}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim").write_text("untouched")
    os.chmod(folder / "victim", 0o644)
    return folder


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox(base_dir=tmp_path / "sandboxes") as box:  # the same filesystem as `outside`: a hard link could reach it
        yield box


def _victim(outside: Path) -> tuple[str, int, int, int, list[str]]:
    info = os.lstat(outside / "victim")
    return (outside / "victim").read_text(), stat.S_IMODE(info.st_mode), info.st_uid, info.st_nlink, sorted(os.listdir(outside))


def _attempt(data: bytes, sandbox: Sandbox, tmp_path: Path, **kwargs: Any) -> BaseException | None:
    archive = tmp_path / "folders.tar"
    archive.write_bytes(data)
    try:
        unpack_folders(archive, sandbox, FOLDERS, **kwargs)
    except Exception as e:  # what was raised is checked by the caller, after the harm is
        return e
    return None


def _empty(sandbox: Sandbox) -> bool:
    """Nothing of the archive in the session's folders (refused before they were even made, or emptied)."""
    return all(not (sandbox.root / name).exists() or not any((sandbox.root / name).iterdir()) for name in FOLDERS)


ATTACKS: dict[str, list[dict[str, Any]]] = {
    "a file written through a symlink": [*d("work"), link("work/l", "{outside}"), f("work/l/victim")],
    "a folder made through a symlink": [link("work/l", "{outside}"), *d("work/l/made")],
    "a folder's mode set through a symlink": [link("work/l", "{outside}/victim"), {"p": "work/l", "k": "t"}],
    "a hard link through a symlink": [link("work/l", "{outside}"), {"p": "work/h", "k": "h", "l": "work/l/victim"}],
    "a hard link to a name not in the archive": [{"p": "work/h", "k": "h", "l": "home/missing"}],
    "a hard link to a folder": [*d("work/dir"), {"p": "work/h", "k": "h", "l": "work/dir"}],
    "a hard link, then a file through it": [f("work/a", b"x"), {"p": "work/h", "k": "h", "l": "work/a"}, f("work/h/x")],
    "an absolute name": [f("/etc/openenv-pwned")],
    "a name that climbs out": [f("work/../../outside/victim")],
    "a name that climbs out at the end": [f("work/a/..")],
    "a folder not among the snapshot's": [f("etc/passwd")],
    "a character device": [{"p": "work/null", "k": "c"}],
    "a block device": [{"p": "work/sda", "k": "b", "dev": [8, 0]}],
    "a file, then a symlink of the same name": [f("work/a", b"x"), link("work/a", "{outside}")],
    "a folder, then a symlink in its place, then a file through it": [
        *d("work/a"), link("work/a", "{outside}"), f("work/a/victim")
    ],
    "a file whose size runs past the end": [{"p": "work/a", "k": "f", "s": 1 << 40}],
    "a header that is not JSON": [{"p": "work/a", "k": "f", "s": 0, "data": b""}],
}


def _build(entries: list[dict[str, Any]], outside: Path) -> bytes:
    headers = [{k: v for k, v in entry.items() if k != "data"} for entry in entries]
    built: list[dict[str, Any]] = json.loads(json.dumps(headers).replace("{outside}", str(outside)))
    for entry, original in zip(built, entries, strict=True):
        if "data" in original:
            entry["data"] = original["data"]
    return raw_archive(*built)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_hostile_checkpoint_file_is_refused_and_nothing_outside_changes(
    attack: str, sandbox: Sandbox, outside: Path, tmp_path: Path
) -> None:
    before = _victim(outside)
    data = _build(ATTACKS[attack], outside)
    if attack == "a header that is not JSON":
        data = MAGIC + (12).to_bytes(4, "big") + b"{not json!!}"
    error = _attempt(data, sandbox, tmp_path)
    assert _victim(outside) == before  # not written, linked, chmodded or chowned through anything
    assert not Path("/etc/openenv-pwned").exists()
    assert isinstance(error, ArchiveRejected), f"{attack}: {type(error).__name__}: {error}"
    assert _empty(sandbox)  # nothing of a refused archive is written


def test_setuid_and_setgid_bits_are_dropped(sandbox: Sandbox, tmp_path: Path) -> None:
    assert _attempt(raw_archive(f("work/s", b"#!/bin/sh\n", m=0o6755), *d("work/g")), sandbox, tmp_path) is None
    assert stat.S_IMODE(os.stat(sandbox.root / "work" / "s").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(sandbox.root / "work" / "g").st_mode) & 0o6000 == 0


def test_the_checkpoint_file_itself_is_never_followed(sandbox: Sandbox, tmp_path: Path, outside: Path) -> None:
    (outside / "real.tar").write_bytes(raw_archive(f("work/a", b"from outside")))
    (tmp_path / "folders.tar").symlink_to(outside / "real.tar")
    with pytest.raises(ArchiveRejected, match="not a regular file|symbolic link|link"):
        unpack_folders(tmp_path / "folders.tar", sandbox, FOLDERS)
    assert _empty(sandbox)


def test_a_checkpoint_file_that_is_a_fifo_is_refused_without_waiting(sandbox: Sandbox, tmp_path: Path) -> None:
    fifo = tmp_path / "folders.tar"
    os.mkfifo(fifo)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            unpack_folders(fifo, sandbox, FOLDERS)
        except Exception as e:
            errors.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=10)
    hung = worker.is_alive()
    if hung:  # let the old reader go: a writer opens and closes
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=10)
    assert not hung, "unpacking waited on a FIFO for a writer"
    assert errors and isinstance(errors[0], ArchiveRejected)


def test_the_limits_bound_a_checkpoint_file(sandbox: Sandbox, tmp_path: Path) -> None:
    from openenv_sdk.regrade import ArchiveLimits

    many = raw_archive(*[f(f"work/f{i}", b"x") for i in range(30)])
    error = _attempt(many, sandbox, tmp_path, limits=ArchiveLimits(max_members=20))
    assert isinstance(error, ArchiveRejected) and "max_members" in str(error)
    big = raw_archive(f("work/a", b"a" * 600), f("work/b", b"b" * 600))
    error = _attempt(big, sandbox, tmp_path, limits=ArchiveLimits(max_unpacked_bytes=1000))
    assert isinstance(error, ArchiveRejected) and "max_unpacked_bytes" in str(error)
    assert _empty(sandbox)


def test_folders_nested_past_the_recursion_limit_round_trip(sandbox: Sandbox, tmp_path: Path) -> None:
    """The agent can `mkdir -p` 1,200 folders deep: packing walks in a loop (it recursed, and failed)."""
    src = tmp_path / "src"
    folder = src / "work"
    folder.mkdir(parents=True)
    try:
        for _ in range(1200):  # one mkdir at a time: os.makedirs itself recurses
            folder = folder / "d"
            folder.mkdir()
        (folder / "f").write_text("deep")
        pack_folders(src, FOLDERS, tmp_path / "folders.tar")
        unpack_folders(tmp_path / "folders.tar", sandbox, FOLDERS)
        assert (sandbox.root / "work" / Path(*["d"] * 1200) / "f").read_text() == "deep"
    finally:  # pytest's own clean-up (shutil.rmtree) recurses, and would fail on these trees
        remove_tree(src)
        remove_tree(sandbox.root / "work")


# --- the saved shell the agent can replace (no tampering: the agent's own doing) ----------------


def test_rewriting_the_saved_shell_never_follows_a_link(tmp_path: Path, outside: Path) -> None:
    old_root = str(tmp_path / "old-root")
    (outside / "victim").write_text(f"names {old_root} here")
    before = _victim(outside)
    shell = tmp_path / "shell"
    shell.symlink_to(outside / "victim")
    rewrite_text(shell, old_root, "/new/root")
    assert _victim(outside) == before
    assert shell.is_symlink()


def test_rewriting_a_saved_shell_that_is_a_fifo_does_not_wait(tmp_path: Path) -> None:
    shell = tmp_path / "shell"
    os.mkfifo(shell)
    worker = threading.Thread(target=rewrite_text, args=(shell, "/a", "/b"), daemon=True)
    worker.start()
    worker.join(timeout=10)
    hung = worker.is_alive()
    if hung:
        os.close(os.open(shell, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=10)
    assert not hung, "rewrite_text waited on a FIFO for a writer"


# --- through real servers: the agent's saved shell, and a checkpoint tampered on disk -------------


def _terminal() -> type[Environment[Any, Any, Any]]:
    env_cls = load_environment(ROOT / "environments" / "terminal").env_cls
    assert env_cls is not None
    return env_cls


TERMINAL = _terminal()


def _bash(env: GenericEnvClient, command: str) -> str:
    result = env.step({"tool": "bash", "arguments": {"command": command}})
    return str(result.observation["result"]["content"][0]["text"])


def test_a_saved_shell_made_a_link_by_the_agent_is_not_followed_by_a_fork(tmp_path: Path, outside: Path) -> None:
    """The agent replaces the shell's EXIT trap: its saved shell becomes a link to a root-owned
    file outside that names the session's folder (which a restore rewrites in the saved shell)."""
    store = tmp_path / "store"
    with serve_app(create_app(TERMINAL, config=ServerConfig(checkpoint_dir=str(store)))) as url, GenericEnvClient(url) as env:
        env.reset(task_id="env_merge")
        root = _bash(env, "dirname \"$PWD\"").split("\n")[0]
        (outside / "victim").write_text(f"config naming {root}/work\n")
        before = _victim(outside)
        out = _bash(env, f"echo hi > mine; trap 'ln -sfn {outside}/victim \"$__oe_state/shell\"' EXIT")
        assert out.endswith("[exit code 0]")
        (copy,) = env.fork(1)
        with copy:
            assert _bash(copy, "cat mine") == "hi\n[exit code 0]"
        assert _victim(outside) == before


def test_a_checkpoint_tampered_on_disk_is_refused_by_the_next_server(tmp_path: Path, outside: Path) -> None:
    store = tmp_path / "store"
    config = ServerConfig(checkpoint_dir=str(store))
    with serve_app(create_app(TERMINAL, config=config)) as url, GenericEnvClient(url) as env:
        env.reset(task_id="env_merge")
        _bash(env, "echo kept > a")
        honest = env.checkpoint().handle
        handles = {"through-link": env.checkpoint().handle, "archive-link": env.checkpoint().handle,
                   "meta-link": env.checkpoint().handle}
    # the server is gone; its store is tampered with before the next one starts
    before = _victim(outside)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    archive = store / handles["through-link"] / "files" / "folders.tar"
    archive.write_bytes(raw_archive(*d("work"), link("work/l", str(outside)), f("work/l/victim"), f("work/l/new")))
    archive = store / handles["archive-link"] / "files" / "folders.tar"
    shutil.copy(archive, elsewhere / "folders.tar")
    archive.unlink()
    archive.symlink_to(elsewhere / "folders.tar")
    meta = store / handles["meta-link"] / "checkpoint.json"
    shutil.copy(meta, elsewhere / "checkpoint.json")
    meta.unlink()
    meta.symlink_to(elsewhere / "checkpoint.json")
    with serve_app(create_app(TERMINAL, config=config)) as url, GenericEnvClient(url) as env:
        env.reset(task_id="env_merge")
        for name, handle in handles.items():
            with pytest.raises(CheckpointError) as refused:
                env.restore(handle)
            assert refused.value.code in ("SNAPSHOT_UNSUPPORTED", "CHECKPOINT_NOT_FOUND"), f"{name}: {refused.value}"
        assert _victim(outside) == before and not (outside / "new").exists()
        env.restore(honest)  # an honest one still restores, and the session goes on
        assert _bash(env, "cat a") == "kept\n[exit code 0]"
