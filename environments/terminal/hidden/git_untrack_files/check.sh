. "$CHECK_DIR/lib.sh"
r=repo
expect_eq "one new commit on top of the old tip" 332ed372f703a976855f3adea21f75a380b2f551 "$(git_in $r rev-parse HEAD^)"
expect_eq "its message" "Stop tracking local files" "$(git_in $r log -1 --format=%s)"
expect_eq "only the project's own files stay tracked" '.gitignore
package.json
src/index.js' "$(git_in $r ls-tree -r --name-only HEAD)"
check "secrets.env is still on disk" test -f repo/secrets.env
check "node_modules/ is still on disk" test -f repo/node_modules/left-pad/index.js -a -f repo/node_modules/.bin/tool
check "git ignores secrets.env" git_in $r check-ignore -q secrets.env
check "git ignores node_modules/" git_in $r check-ignore -q node_modules/left-pad/index.js
check "dist/ is still ignored" git_in $r check-ignore -q dist/bundle.js
expect_eq "the working tree is clean" "" "$(git_in $r status --porcelain)"
finish
