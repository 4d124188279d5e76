. "$CHECK_DIR/lib.sh"
check "current is a symbolic link" test -L current
expect_eq "current points to releases/v1.10.1" releases/v1.10.1 "$(readlink current)"
expect_file "current resolves to the release" current/VERSION v1.10.1
finish
