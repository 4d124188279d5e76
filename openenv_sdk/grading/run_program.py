"""Client of `ProgramRunServer`: run one agent program in a fresh sandbox, as if it ran here.

A check (trusted code, in a grading sandbox) runs it instead of the agent's program:

    python3 -I -S run_program.py --socket /path/run.sock [--cwd DIR] [--timeout-s 10] [--pass-env] [--read-only] -- ./bin/greet Alice

It sends the request over the unix socket, relays its own stdin to the program and the
program's stdout and stderr to its own, and exits with the program's exit code (124 when the
program ran out of time, 128+N when a signal N ended it, 126 when the server refused the request,
with the reason on stderr). The program runs on the server's side in a sandbox of its own (its
own pid namespace, no network): it can neither see nor signal this process.

Standard library only, so that it runs with `-I -S` from a file the server wrote (it imports
nothing from the SDK); the wire format is `openenv_sdk.grading.program_runs`'.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import threading

__all__ = ["HEADER", "main", "read_frame", "write_frame"]

HEADER = struct.Struct(">cI")
"""A frame: one type byte, then the payload's length (big-endian), then the payload."""
MAX_FRAME_BYTES = 1 << 20
SOCKET_ENV = "OPENENV_RUN_SOCKET"
GRACE_S = 30.0
"""How much longer than the program's own limit the client waits for the server's answer."""
REFUSED = 126
TIMED_OUT = 124


def write_frame(sock: socket.socket, kind: bytes, payload: bytes, lock: threading.Lock | None = None) -> None:
    data = HEADER.pack(kind, len(payload)) + payload
    if lock is None:
        sock.sendall(data)
        return
    with lock:
        sock.sendall(data)


def _read_exact(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(min(size - len(chunks), 1 << 16))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def read_frame(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """The next frame, or None when the other side closed the connection.

    Raises:
        ValueError: a frame longer than `MAX_FRAME_BYTES`.
    """
    header = _read_exact(sock, HEADER.size)
    if header is None:
        return None
    kind, size = HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {size} bytes (the limit is {MAX_FRAME_BYTES})")
    payload = _read_exact(sock, size) if size else b""
    if payload is None:
        return None
    return kind, payload


def _forward_stdin(sock: socket.socket, lock: threading.Lock) -> None:
    try:
        while True:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                break
            write_frame(sock, b"I", chunk, lock)
    except OSError:
        pass
    try:
        write_frame(sock, b"E", b"", lock)
    except OSError:
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BrokenPipeError:
            return


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="run_program", description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", default=os.environ.get(SOCKET_ENV), help=f"the server's socket (default ${SOCKET_ENV})")
    parser.add_argument("--cwd", default=None, help="the program's working directory (default: this one)")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="the program's wall-clock limit, in seconds")
    parser.add_argument("--pass-env", action="store_true", help="give the program this process's environment")
    parser.add_argument("--read-only", action="store_true", help="the program sees the server's folders read-only")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the program and its arguments")
    args = parser.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error("no program given (put it after --)")
    if not args.socket:
        parser.error(f"no socket: pass --socket or set {SOCKET_ENV}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    request: dict[str, object] = {
        "argv": args.command,
        "cwd": os.path.abspath(args.cwd or os.getcwd()),
        "timeout_s": args.timeout_s,
    }
    if args.read_only:
        request["read_only"] = True
    if args.pass_env:
        request["env"] = {k: v for k, v in os.environ.items() if k != SOCKET_ENV}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(args.timeout_s + GRACE_S)
    try:
        sock.connect(args.socket)
        lock = threading.Lock()
        write_frame(sock, b"R", json.dumps(request).encode(), lock)
        threading.Thread(target=_forward_stdin, args=(sock, lock), daemon=True).start()
        while True:
            frame = read_frame(sock)
            if frame is None:
                sys.stderr.write("run_program: the server closed the connection without an exit code\n")
                return REFUSED
            kind, payload = frame
            if kind == b"O":
                _write_all(1, payload)
            elif kind == b"X":
                _write_all(2, payload)
            elif kind == b"Z":
                end = json.loads(payload)
                if end.get("timed_out"):
                    return TIMED_OUT
                code = int(end["exit_code"])
                return 128 - code if code < 0 else code
            elif kind == b"F":
                sys.stderr.write(f"run_program: refused: {json.loads(payload)['error']}\n")
                return REFUSED
    except (OSError, ValueError) as e:
        sys.stderr.write(f"run_program: {type(e).__name__}: {e}\n")
        return TIMED_OUT if isinstance(e, TimeoutError) else REFUSED
    finally:
        sock.close()


if __name__ == "__main__":
    sys.exit(main())
