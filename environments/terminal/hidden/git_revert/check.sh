. "$CHECK_DIR/lib.sh"
r=repo
expect_eq "main is checked out" main "$(git_in $r symbolic-ref --short HEAD)"
expect_eq "history is kept: HEAD's parent is the old tip" 684d338569bcfa4b9888db89492ad09ada5acb46 "$(git_in $r rev-parse HEAD^)"
expect_eq "HEAD reverts 'Add debug logging'" 'Revert "Add debug logging"' "$(git_in $r log -1 --format=%s)"
check "debug.py is gone" test -z "$(git_in $r ls-tree --name-only HEAD debug.py)"
expect_eq "app.py no longer imports debug" 'def handle(request):
    return "ok"' "$(git_in $r show HEAD:app.py)"
expect_eq "the later commits' files stay" 'requests==2.31.0' "$(git_in $r show HEAD:requirements.txt)"
check "health.py stays" test -n "$(git_in $r ls-tree --name-only HEAD health.py)"
expect_eq "the working tree is clean" "" "$(git_in $r status --porcelain)"
finish
