# Helpers for the hidden checks; the grader sends this file with every check (never in the image).
#
# A check runs in a copy of the final workspace (its working directory) and prints one line per
# condition, `PASS: what` or `FAIL: what`, then calls `finish`: exit 0 when nothing failed.

__failed=0

pass() { printf 'PASS: %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*"; __failed=$((__failed + 1)); }

# check WHAT COMMAND...: the condition holds when COMMAND succeeds (its output is not shown).
check() {
  local what=$1
  shift
  if "$@" >/dev/null 2>&1; then pass "$what"; else fail "$what"; fi
}

# expect_eq WHAT WANT GOT: two texts are equal (shown when they differ).
expect_eq() {
  if [ "$2" == "$3" ]; then
    pass "$1"
  else
    fail "$1"
    printf '  want: %q\n  got:  %q\n' "${2:0:400}" "${3:0:400}"
  fi
}

# expect_file WHAT FILE WANT: FILE is a regular file whose text is WANT (trailing newlines ignored).
expect_file() {
  if [ ! -f "$2" ]; then
    fail "$1 (no file $2)"
    return
  fi
  expect_eq "$1" "$3" "$(cat -- "$2" 2>/dev/null)"
}

# file_list DIR: every non-directory under DIR, one relative path a line, in byte order.
file_list() { (cd -- "$1" 2>/dev/null && find . ! -type d | sed 's|^\./||' | LC_ALL=C sort); }

# Anything the agent wrote (its scripts and programs, `python3 its.py`, `bash its.sh`) runs only
# through run_program / run_agent: in a fresh sandbox of its own (its own pid namespace and uid,
# no network) that sees the copy of the workspace and $SCRATCH, never this check's processes or
# files; every process it started ends with it. Its output and exit code come back here.

# run_program TIMEOUT_S COMMAND...: COMMAND in the current directory (inside $WORKSPACE or
# $SCRATCH), stdin, stdout and stderr passed through, its exit code (124: out of time).
run_program() { "$PYTHON" -I -S "$RUN_PROGRAM" --cwd "$PWD" --timeout-s "$1" -- "${@:2}"; }

# run_agent COMMAND...: run something the agent wrote, bounded (10 s), stdin empty, stderr dropped.
run_agent() { run_program 10 "$@" </dev/null 2>/dev/null; }

# git_in DIR ARGS...: git in DIR through trusted_git (a sanitized copy of DIR's git folder: none of
# the config, hooks, attributes or filters the agent wrote), the output alone. Plain `git` in a
# check is the same program (first on PATH).
git_in() { "$PYTHON" -I -S "$TRUSTED_GIT" -C "$1" "${@:2}" 2>/dev/null; }

finish() {
  if [ "$__failed" -eq 0 ]; then
    echo "RESULT: every condition holds"
    exit 0
  fi
  echo "RESULT: $__failed condition(s) failed"
  exit 1
}
