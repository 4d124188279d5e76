. "$CHECK_DIR/lib.sh"
check "deploy.sh is executable" test -x deploy.sh -a -f deploy.sh
rm -rf out
run_agent ./deploy.sh "my app" >/dev/null
expect_file "config.txt is copied for 'my app'" "out/my app/config.txt" "replicas=3"
expect_file "version.txt for 'my app'" "out/my app/version.txt" "2.4.1"
run_agent ./deploy.sh "my app" >/dev/null
check "a second run succeeds" run_agent ./deploy.sh "my app"
run_agent ./deploy.sh api >/dev/null
expect_file "version.txt for api" out/api/version.txt "2.4.1"
expect_eq "nothing else is made under out/" 'api/config.txt
api/version.txt
my app/config.txt
my app/version.txt' "$(file_list out)"
run_program 10 ./deploy.sh </dev/null >"$TMPDIR/usage.out" 2>"$TMPDIR/usage.err"
expect_eq "no argument: exit status 2" 2 "$?"
check "no argument: usage on stderr" grep -qi usage "$TMPDIR/usage.err"
check "no argument: nothing on stdout" test ! -s "$TMPDIR/usage.out"
finish
