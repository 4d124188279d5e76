"""pytest collection rules for this folder: `hidden/` holds the tasks' hidden tests, which run only
against a solution, inside the sandbox, at grading time (see grader.py); never collect them here."""

collect_ignore = ["hidden"]
