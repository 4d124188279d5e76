"""pytest: the task repositories and hidden tests are data, not this folder's tests."""

collect_ignore = ["tasks", "hidden"]
