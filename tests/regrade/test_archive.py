"""The workspace archive is the agent's data: every hostile archive is refused, and nothing of it
is written; an honest workspace comes back as it was (files, modes, symlinks, hard links, FIFOs)."""

from __future__ import annotations

import gzip
import io
import os
import socket
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from openenv_sdk.regrade import ArchiveLimits, ArchiveRejected, WorkspaceTooLarge, pack_workspace, unpack_workspace
from openenv_sdk.sandbox import remove_tree


def make_tar(build: Callable[[tarfile.TarFile], None], *, compress: bool = True) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        build(tar)
    return gzip.compress(raw.getvalue()) if compress else raw.getvalue()


def add_file(tar: tarfile.TarFile, name: str, data: bytes = b"x", **fields: object) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data))


def add_entry(tar: tarfile.TarFile, name: str, kind: bytes, linkname: str = "", **fields: object) -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info)


def refused(data: bytes, dest: Path, match: str, limits: ArchiveLimits | None = None) -> None:
    with pytest.raises(ArchiveRejected, match=match):
        unpack_workspace(data, dest, limits)
    assert list(dest.iterdir()) == []  # nothing written


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    folder = tmp_path / "dest"
    folder.mkdir()
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim").write_text("untouched")
    return folder


def test_an_honest_workspace_comes_back_as_it_was(tmp_path: Path, dest: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg" / "deep").mkdir(parents=True)
    (src / "pkg" / "deep" / "a.py").write_text("print('hi')\n")
    (src / "run.sh").write_text("#!/bin/sh\necho ok\n")
    os.chmod(src / "run.sh", 0o750)
    os.chmod(src / "pkg" / "deep", 0o500)
    os.symlink("/etc/passwd", src / "abs-link")  # kept as it is: the grader's copy kept it too
    os.symlink("pkg/deep/a.py", src / "rel-link")
    os.link(src / "run.sh", src / "hard")
    os.mkfifo(src / "pipe")
    os.utime(src / "run.sh", (1_600_000_000, 1_600_000_000))
    with socket.socket(socket.AF_UNIX) as sock:  # a socket is left out
        sock.bind(str(src / "sock"))
        data = pack_workspace(src)
    assert unpack_workspace(data, dest) == 8
    assert (dest / "pkg" / "deep" / "a.py").read_text() == "print('hi')\n"
    assert stat.S_IMODE(os.stat(dest / "run.sh").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(dest / "pkg" / "deep").st_mode) == 0o500
    assert os.readlink(dest / "abs-link") == "/etc/passwd"
    assert os.readlink(dest / "rel-link") == "pkg/deep/a.py"
    assert os.stat(dest / "hard").st_ino == os.stat(dest / "run.sh").st_ino
    assert stat.S_ISFIFO(os.lstat(dest / "pipe").st_mode)
    assert os.stat(dest / "run.sh").st_mtime == 1_600_000_000
    assert not (dest / "sock").exists()


def test_setuid_bits_are_dropped(tmp_path: Path, dest: Path) -> None:
    data = make_tar(lambda tar: add_file(tar, "suid", b"#!/bin/sh\n", mode=0o4755))
    unpack_workspace(data, dest)
    assert stat.S_IMODE(os.stat(dest / "suid").st_mode) == 0o755


@pytest.mark.parametrize("name", ["../outside/victim", "a/../../outside/victim", "/tmp/evil", "./../x"])
def test_a_name_that_climbs_out_is_refused(dest: Path, outside: Path, name: str) -> None:
    refused(make_tar(lambda tar: add_file(tar, name, b"pwned")), dest, "outside the workspace")
    assert (outside / "victim").read_text() == "untouched"


def test_a_member_written_through_a_symlink_is_refused(dest: Path, outside: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        add_entry(tar, "link", tarfile.SYMTYPE, str(outside))
        add_file(tar, "link/victim", b"pwned")

    refused(make_tar(build), dest, "through the link 'link'")
    assert (outside / "victim").read_text() == "untouched"


def test_a_member_through_a_symlinked_parent_folder_is_refused(dest: Path, outside: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        add_entry(tar, "a", tarfile.DIRTYPE, mode=0o755)
        add_entry(tar, "a/b", tarfile.SYMTYPE, str(outside))
        add_file(tar, "a/b/c/victim", b"pwned")

    refused(make_tar(build), dest, "through the link 'a/b'")


def test_a_symlink_replacing_an_earlier_folder_is_refused(dest: Path, outside: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        add_entry(tar, "a", tarfile.DIRTYPE, mode=0o755)
        add_entry(tar, "a", tarfile.SYMTYPE, str(outside))
        add_file(tar, "a/victim", b"pwned")

    refused(make_tar(build), dest, "appears twice")


@pytest.mark.parametrize("target", ["/etc/passwd", "../outside/victim", "missing"])
def test_a_hard_link_to_anything_but_an_earlier_file_is_refused(dest: Path, target: str) -> None:
    refused(make_tar(lambda tar: add_entry(tar, "h", tarfile.LNKTYPE, target)), dest, "hard link|outside")


def test_a_hard_link_then_a_write_through_it_is_refused(dest: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        add_file(tar, "f", b"data")
        add_entry(tar, "h", tarfile.LNKTYPE, "f")
        add_file(tar, "h/x", b"pwned")

    refused(make_tar(build), dest, "through the link 'h'")


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE])
def test_device_files_are_refused(dest: Path, kind: bytes) -> None:
    refused(make_tar(lambda tar: add_entry(tar, "dev", kind, devmajor=1, devminor=3)), dest, "device or special")


def test_a_file_past_the_unpacked_limit_is_refused_before_anything_is_written(dest: Path) -> None:
    limits = ArchiveLimits(max_unpacked_bytes=1000)

    def build(tar: tarfile.TarFile) -> None:
        add_file(tar, "small", b"a" * 600)
        add_file(tar, "big", b"b" * 600)

    data = make_tar(build)
    refused(data, dest, "unpacks to over", limits)


def test_a_gzip_bomb_is_refused_while_inflating(dest: Path) -> None:
    """256 MiB of zeros in 256 KiB: refused once the inflated bytes pass the bound, never held whole."""
    bomb = io.BytesIO()
    with gzip.GzipFile(fileobj=bomb, mode="wb", compresslevel=9) as gz:
        block = b"\0" * (1 << 20)
        for _ in range(256):
            gz.write(block)
    data = bomb.getvalue()
    assert len(data) < 1 << 20
    limits = ArchiveLimits(max_archive_bytes=4 << 20, max_unpacked_bytes=8 << 20, max_members=100)
    refused(data, dest, "inflates to over", limits)


def test_a_bomb_in_a_pax_header_is_refused(dest: Path) -> None:
    """A PAX header's data is read whole by tarfile: a huge one inflates past the bound first."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("f")
        info.pax_headers = {"comment": "x" * (16 << 20)}
        tar.addfile(info, io.BytesIO(b""))
    refused(gzip.compress(raw.getvalue()), dest, "inflates to over", ArchiveLimits(max_unpacked_bytes=1 << 20, max_members=100))


def test_too_many_members_are_refused(dest: Path) -> None:

    def build(tar: tarfile.TarFile) -> None:
        for i in range(50):
            add_file(tar, f"f{i}")

    data = make_tar(build)
    refused(data, dest, "more than 20 members", ArchiveLimits(max_members=20))


def test_an_archive_over_its_compressed_limit_is_refused(dest: Path) -> None:
    data = make_tar(lambda tar: add_file(tar, "f", os.urandom(4096)))
    refused(data, dest, "max_archive_bytes", ArchiveLimits(max_archive_bytes=1024))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"not gzip at all", "not a gzip stream"),
        (gzip.compress(b"not a tar archive, only text" * 40), "not a tar archive|damaged"),
        (make_tar(lambda tar: add_file(tar, "f", b"x" * 5000))[:-40], "cut short|damaged|gzip"),
    ],
)
def test_a_damaged_archive_is_refused(dest: Path, data: bytes, match: str) -> None:
    refused(data, dest, match)


def test_a_name_with_nul_or_too_long_is_refused(dest: Path) -> None:
    refused(make_tar(lambda tar: add_file(tar, "a" * 300)), dest, "too long", ArchiveLimits(max_name_bytes=255))


def test_unpacking_into_a_folder_that_is_not_empty_is_refused(tmp_path: Path, dest: Path) -> None:
    (dest / "left").write_text("x")
    with pytest.raises(ArchiveRejected, match="not empty"):
        unpack_workspace(make_tar(lambda tar: add_file(tar, "f")), dest)


def test_packing_past_a_limit_says_which(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "big").write_bytes(os.urandom(64 * 1024))
    with pytest.raises(WorkspaceTooLarge, match=r"over 32768 bytes compressed \(max_archive_bytes\)"):
        pack_workspace(src, ArchiveLimits(max_archive_bytes=32 * 1024))
    with pytest.raises(WorkspaceTooLarge, match=r"max_unpacked_bytes"):
        pack_workspace(src, ArchiveLimits(max_unpacked_bytes=1024))
    for i in range(5):
        (src / f"f{i}").write_text("x")
    with pytest.raises(WorkspaceTooLarge, match="more than 3 files"):
        pack_workspace(src, ArchiveLimits(max_members=3))


def test_packing_never_follows_a_symlink_out(tmp_path: Path, outside: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    os.symlink(outside, src / "escape")
    os.symlink(outside / "victim", src / "file-escape")
    with tarfile.open(fileobj=io.BytesIO(pack_workspace(src)), mode="r:gz") as tar:
        names = {m.name: m for m in tar.getmembers()}
    assert set(names) == {"escape", "file-escape"} and all(m.issym() for m in names.values())


def test_a_folder_named_after_its_contents_is_unpacked_and_a_file_of_that_name_refused(dest: Path, tmp_path: Path) -> None:
    def later_folder(tar: tarfile.TarFile) -> None:
        add_file(tar, "a/b", b"inside")
        add_entry(tar, "a", tarfile.DIRTYPE, mode=0o750)

    assert unpack_workspace(make_tar(later_folder), dest) == 2
    assert (dest / "a" / "b").read_bytes() == b"inside"
    assert stat.S_IMODE(os.stat(dest / "a").st_mode) == 0o750
    other = tmp_path / "other"
    other.mkdir()

    def later_file(tar: tarfile.TarFile) -> None:
        add_file(tar, "a/b")
        add_file(tar, "a")

    refused(make_tar(later_file), other, "appears twice")


def _nest(top: Path, depth: int) -> Path:
    folder = top
    for _ in range(depth):  # one mkdir at a time: os.makedirs itself recurses
        folder = folder / "d"
        folder.mkdir()
    return folder


def test_a_workspace_nested_past_the_recursion_limit_round_trips(tmp_path: Path, dest: Path) -> None:
    """The agent can `mkdir -p` 1,200 folders deep: packing walks in a loop (it recursed, and failed)."""
    src = tmp_path / "src"
    src.mkdir()
    try:
        (_nest(src, 1200) / "f").write_text("deep")
        assert unpack_workspace(pack_workspace(src), dest) == 1201
        assert (dest / Path(*["d"] * 1200) / "f").read_text() == "deep"
    finally:  # pytest's own clean-up (shutil.rmtree) recurses, and would fail on these trees
        remove_tree(src)
        remove_tree(dest)
