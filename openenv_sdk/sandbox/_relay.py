"""The in-sandbox end of an egress relay: 127.0.0.1:PORT -> a unix socket bound into the sandbox.

Standard library only; run by `Sandbox.run` inside the command's sandbox (its own network
namespace, as the session's user), in front of the command:

    python3 -I -S _relay.py 8000=/run/openenv-net/0.sock 3128=/run/openenv-proxy/proxy.sock -- CMD ARGS...

It binds every `127.0.0.1:PORT` first (so the command never races it), forks a child that
relays each connection to its unix socket, and execs the command in its own process, which
keeps the command's pid, stdin, output and exit status. The child has no stdio of the command's
and ends with the sandbox's pid namespace (or when its parent is gone).

The socket's other end is on the trusted side, and it decides what the bytes reach (one fixed
endpoint, or the allowlist proxy): nothing here is a security boundary, which is why it may run
as the agent's user.
"""

import _socket  # the C module: `socket` imports enum and more, and the command waits for this process
import os
import sys

BUFFER_BYTES = 65536
MAX_CONNECTIONS = 64


def _serve(listeners: list[tuple[int, str]], parent: int) -> None:
    """The child: relay every connection of each listener to its unix socket (threads)."""
    import socket
    import threading
    import time

    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)  # never hold the command's pipes open
    slots = threading.Semaphore(MAX_CONNECTIONS)

    def pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(BUFFER_BYTES)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
                try:
                    sock.shutdown(how)
                except OSError:
                    pass

    def carry(client: socket.socket, path: str) -> None:
        try:
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(path)
            except OSError:
                upstream.close()
                client.close()
                return
            back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
            back.start()
            pump(client, upstream)
            back.join()
            upstream.close()
            client.close()
        finally:
            slots.release()

    def accept_loop(listener: socket.socket, path: str) -> None:
        while True:
            client, _ = listener.accept()
            if not slots.acquire(blocking=False):
                client.close()  # bounded: the trusted side bounds its own end too
                continue
            threading.Thread(target=carry, args=(client, path), daemon=True).start()

    for fd, path in listeners:
        listener = socket.socket(_socket.AF_INET, _socket.SOCK_STREAM, fileno=fd)
        threading.Thread(target=accept_loop, args=(listener, path), daemon=True).start()
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: _relay.py PORT=SOCKET... -- COMMAND...", file=sys.stderr)
        return 2
    split = argv.index("--")
    specs, command = argv[:split], argv[split + 1 :]
    if not command:
        print("_relay.py: no command after --", file=sys.stderr)
        return 2
    listeners: list[tuple[int, str]] = []
    for spec in specs:
        port_text, path = spec.split("=", 1)
        listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port_text)))
        listener.listen(64)
        listeners.append((listener.detach(), path))  # a bare fd: closed on exec (not inheritable)
    parent = os.getpid()
    if os.fork() == 0:
        _serve(listeners, parent)
    for fd, _ in listeners:
        os.close(fd)
    try:
        os.execvp(command[0], command)
    except OSError as e:
        print(f"{command[0]}: {e.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
