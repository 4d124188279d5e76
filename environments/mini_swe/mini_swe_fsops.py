"""mini_swe's file tools: read, list, search, edit and write files in the workspace.

The server never touches the agent's files itself: it runs this module's source in the
session's `openenv_sdk.sandbox.Sandbox`, as the session's uid (`python -I -S -c <source>`, a
JSON request on stdin, a JSON answer on stdout), so the sandbox, not a path check, decides what
a tool may read or write. Paths are still kept inside the workspace, for clear errors. Standard
library only.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable

MAX_READ_LINES = 400
MAX_LINE_CHARS = 2000
MAX_SEARCH_MATCHES = 200
MAX_LIST_ENTRIES = 500
MAX_SEARCH_FILE_BYTES = 2 * 1024 * 1024
SKIP_DIRS = {".git", "__pycache__", ".pytest_cache"}
CONTEXT_LINES = 3


class OpRefused(Exception):
    """An operation refused with a message for the agent (bad path, snippet not found, ...).

    Not the SDK's `ToolFailure`: this module runs in the sandbox as `python -I -S`, where the SDK
    cannot be imported; the message crosses as JSON and the server raises `ToolFailure` with it."""


def resolve(root: str, path: str) -> str:
    """`path` (relative to `root`, or absolute inside it) as an absolute path inside `root`."""
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        raise OpRefused("path must be a non-empty string")
    full = os.path.normpath(os.path.join(root, path.strip()))
    if full != root and not full.startswith(root + os.sep):
        raise OpRefused(f"{path!r} is outside the repository; use a path relative to {root}")
    return full


def rel(root: str, full: str) -> str:
    return "." if full == root else os.path.relpath(full, root)


def _read_text(full: str, shown: str) -> str:
    if os.path.isdir(full):
        raise OpRefused(f"{shown} is a directory; use list_files to see what it holds")
    data = _read_bytes(full, shown)
    if b"\0" in data[:8192]:
        raise OpRefused(f"{shown} is a binary file ({len(data)} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise OpRefused(f"{shown} is not UTF-8 text") from None


def _read_bytes(full: str, shown: str) -> bytes:
    try:
        with open(full, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        if os.path.islink(full):
            raise OpRefused(f"{shown} is a symbolic link to {os.readlink(full)}, which does not exist") from None
        raise OpRefused(f"{shown} does not exist") from None
    except PermissionError:
        raise OpRefused(f"{shown}: Permission denied") from None


def _numbered(lines: list[str], first: int) -> str:
    out = []
    for number, line in enumerate(lines, start=first):
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" [... {len(line) - MAX_LINE_CHARS} more characters]"
        out.append(f"{number:6}\t{line}")
    return "\n".join(out)


def read_file(root: str, path: str, start_line: int = 1, end_line: int | None = None) -> str:
    full = resolve(root, path)
    shown = rel(root, full)
    lines = _read_text(full, shown).splitlines()
    total = len(lines)
    if total == 0:
        return f"{shown} is empty."
    if start_line < 1:
        raise OpRefused(f"start_line must be at least 1, got {start_line}")
    if start_line > total:
        raise OpRefused(f"start_line {start_line} is past the end of {shown} ({total} lines)")
    if end_line is not None and end_line < start_line:
        raise OpRefused(f"end_line {end_line} is before start_line {start_line}")
    last = min(total, end_line if end_line is not None else total, start_line + MAX_READ_LINES - 1)
    text = _numbered(lines[start_line - 1 : last], start_line)
    header = f"{shown} (lines {start_line}-{last} of {total})"
    if last < total and (end_line is None or end_line > last):
        text += f"\n[... {total - last} more lines; call read_file with start_line={last + 1} ...]"
    return f"{header}\n{text}"


def _walk(top: str):
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        yield dirpath, dirnames, sorted(filenames)


def list_files(root: str, path: str = ".") -> str:
    full = resolve(root, path)
    shown = rel(root, full)
    if not os.path.isdir(full):
        if os.path.exists(full):
            return shown
        raise OpRefused(f"{shown} does not exist")
    entries = []
    for dirpath, dirnames, filenames in _walk(full):
        entries += [rel(root, os.path.join(dirpath, d)) + "/" for d in dirnames]
        entries += [rel(root, os.path.join(dirpath, f)) for f in filenames]
        if len(entries) > MAX_LIST_ENTRIES:
            break
    entries.sort()
    if not entries:
        return f"{shown} is empty."
    more = len(entries) - MAX_LIST_ENTRIES
    text = "\n".join(entries[:MAX_LIST_ENTRIES])
    return text + (f"\n[... {more} more entries; list a subdirectory ...]" if more > 0 else "")


def search(root: str, pattern: str, path: str = ".", regex: bool = False, ignore_case: bool = False) -> str:
    if not pattern:
        raise OpRefused("pattern must not be empty")
    flags = re.IGNORECASE if ignore_case else 0
    try:
        compiled = re.compile(pattern if regex else re.escape(pattern), flags)
    except re.error as e:
        raise OpRefused(f"invalid regular expression {pattern!r}: {e}") from None
    full = resolve(root, path)
    if not os.path.exists(full):
        raise OpRefused(f"{rel(root, full)} does not exist")
    if os.path.isdir(full):
        files = [os.path.join(d, f) for d, _, names in _walk(full) for f in names]
    else:
        files = [full]
    matches: list[str] = []
    total = 0
    matched_files = set()
    for file in files:
        try:
            if os.path.getsize(file) > MAX_SEARCH_FILE_BYTES or not os.path.isfile(file):
                continue
            with open(file, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if compiled.search(line):
                total += 1
                matched_files.add(file)
                if len(matches) < MAX_SEARCH_MATCHES:
                    shown = line if len(line) <= 300 else line[:300] + " [...]"
                    matches.append(f"{rel(root, file)}:{number}: {shown}")
    if not matches:
        return f"No matches for {pattern!r} in {rel(root, full)}."
    summary = f"{total} match{'es' if total != 1 else ''} in {len(matched_files)} file{'s' if len(matched_files) != 1 else ''}"
    if total > len(matches):
        summary += f" (first {len(matches)} shown; narrow the pattern or the path)"
    return summary + "\n" + "\n".join(matches)


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _near_misses(text: str, old: str) -> str:
    """Where a snippet that was not found almost matches (same words, other whitespace)."""
    first = next((line.strip() for line in old.splitlines() if line.strip()), "")
    if not first:
        return ""
    lines = [n for n, line in enumerate(text.splitlines(), start=1) if line.strip() == first]
    if not lines:
        return ""
    where = ", ".join(map(str, lines[:5]))
    return f" A line matching its first line (ignoring indentation) is at line {where}: check indentation and whitespace, and read the file again."


def edit_file(root: str, path: str, old_str: str, new_str: str) -> str:
    full = resolve(root, path)
    shown = rel(root, full)
    if old_str == "":
        raise OpRefused("old_str must not be empty; use write_file to create or overwrite a file")
    if old_str == new_str:
        raise OpRefused("old_str and new_str are the same; nothing would change")
    if os.path.isdir(full):
        raise OpRefused(f"{shown} is a directory")
    if not os.path.lexists(full):
        raise OpRefused(f"{shown} does not exist; use write_file to create it")
    raw = _read_bytes(full, shown)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise OpRefused(f"{shown} is not UTF-8 text") from None
    crlf = "\r\n" in text
    if crlf and "\r\n" not in old_str:  # the agent sees lines, not line endings
        old_str, new_str = old_str.replace("\n", "\r\n"), new_str.replace("\n", "\r\n")
    count = text.count(old_str)
    if count == 0:
        raise OpRefused(
            f"old_str was not found in {shown}; it must match the file exactly, including whitespace.{_near_misses(text, old_str)}"
        )
    if count > 1:
        starts = []
        index = text.find(old_str)
        while index != -1:
            starts.append(str(_line_of(text, index)))
            index = text.find(old_str, index + 1)
        raise OpRefused(
            f"old_str occurs {count} times in {shown} (starting at lines {', '.join(starts)}); "
            f"include more surrounding lines so that it matches exactly once"
        )
    index = text.find(old_str)
    updated = text[:index] + new_str + text[index + len(old_str) :]
    with open(full, "w", encoding="utf-8", newline="") as handle:
        handle.write(updated)
    first = _line_of(updated, index)
    last = first + new_str.count("\n")
    lines = updated.splitlines()
    lo, hi = max(1, first - CONTEXT_LINES), min(len(lines), last + CONTEXT_LINES)
    return f"Edited {shown}: replaced 1 occurrence (now lines {first}-{last}).\n" + _numbered(lines[lo - 1 : hi], lo)


def write_file(root: str, path: str, content: str) -> str:
    full = resolve(root, path)
    shown = rel(root, full)
    if full == root or os.path.isdir(full):
        raise OpRefused(f"{shown} is a directory")
    existed = os.path.exists(full)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8", newline="") as handle:
        handle.write(content)
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    return f"{'Overwrote' if existed else 'Created'} {shown} ({lines} line{'s' if lines != 1 else ''}, {len(content.encode())} bytes)."


OPERATIONS: dict[str, Callable[..., str]] = {
    "read_file": read_file,
    "list_files": list_files,
    "search": search,
    "edit_file": edit_file,
    "write_file": write_file,
}


def main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        text = OPERATIONS[request["op"]](request["root"], **request["args"])
        answer = {"ok": True, "text": text}
    except OpRefused as e:
        answer = {"ok": False, "error": str(e)}
    except OSError as e:
        answer = {"ok": False, "error": f"{e.strerror or e}: {e.filename or ''}".rstrip(": ")}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
