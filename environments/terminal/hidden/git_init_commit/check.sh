. "$CHECK_DIR/lib.sh"
r=project
check "project/ is a git repository" test -d project/.git
expect_eq "the branch is main" main "$(git_in $r symbolic-ref --short HEAD)"
expect_eq "exactly one commit" 1 "$(git_in $r rev-list --count HEAD)"
expect_eq "its message is 'Initial commit'" "Initial commit" "$(git_in $r log -1 --format=%B | sed '/^$/d')"
expect_eq "the commit holds every file but the .log files, and .gitignore" '.gitignore
README.md
logs/CHANGELOG.md
src/main.py
src/util.py' "$(git_in $r ls-tree -r --name-only HEAD)"
check ".gitignore ignores *.log files" git_in $r check-ignore -q some/new.log
expect_eq "nothing to commit, no untracked files" "" "$(git_in $r status --porcelain)"
check "the .log files are still there" test -f project/debug.log -a -f project/logs/build.log
finish
