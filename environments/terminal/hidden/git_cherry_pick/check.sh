. "$CHECK_DIR/lib.sh"
r=repo
expect_eq "main is checked out" main "$(git_in $r symbolic-ref --short HEAD)"
expect_eq "one new commit on top of main's old tip" fda8b77db2170943da11693ba30fd2ea96fbc923 "$(git_in $r rev-parse HEAD^)"
expect_eq "the new commit has one parent" 2 "$(git_in $r rev-list --parents -n 1 HEAD | wc -w)"
expect_eq "its message is the fix's" "Fix off-by-one in pager" "$(git_in $r log -1 --format=%s)"
check "pager.py has the fix" grep -qF "range(0, len(items), size)" <(git_in $r show HEAD:pager.py)
check "the debug commit did not reach main" test -z "$(git_in $r ls-tree --name-only HEAD settings.py)"
expect_eq "the README commit did not reach main" pager "$(git_in $r show HEAD:README.md)"
expect_eq "the working tree is clean" "" "$(git_in $r status --porcelain)"
finish
