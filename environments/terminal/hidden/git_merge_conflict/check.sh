. "$CHECK_DIR/lib.sh"
r=repo
check "the merge is finished (no MERGE_HEAD)" test ! -e repo/.git/MERGE_HEAD
expect_eq "main is checked out" main "$(git_in $r symbolic-ref --short HEAD)"
expect_eq "HEAD's first parent is main's old tip" 0844c4e4e25674b5ad649411773ed96cdf028c95 "$(git_in $r rev-parse HEAD^1)"
expect_eq "HEAD's second parent is feature" bbc19beb4e3d02d2350fdf443e7fa49b834c61ac "$(git_in $r rev-parse HEAD^2)"
expect_eq "greeting.txt keeps both lines, main's first" 'Hello
Welcome to main
Welcome to the feature branch
Bye' "$(git_in $r show HEAD:greeting.txt)"
expect_eq "main's other change is kept (VERSION v2)" v2 "$(git_in $r show HEAD:VERSION)"
expect_eq "feature's other change is kept (FEATURE.md)" "feature notes" "$(git_in $r show HEAD:FEATURE.md)"
expect_eq "the working tree is clean" "" "$(git_in $r status --porcelain)"
finish
