. "$CHECK_DIR/lib.sh"
r=repo
expect_eq "main is checked out" main "$(git_in $r symbolic-ref --short HEAD)"
expect_eq "the message is fixed" "Fix typo in README" "$(git_in $r log -1 --format=%B | sed '/^$/d')"
expect_eq "no commit added" 3 "$(git_in $r rev-list --count HEAD)"
expect_eq "same parent" 832b3433997f348a914fcd54f589571e4db3244c "$(git_in $r rev-parse HEAD^)"
expect_eq "same content" 34587438aa1507d92b5d5ed8fc14452fda8d5886 "$(git_in $r rev-parse 'HEAD^{tree}')"
finish
