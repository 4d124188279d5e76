. "$CHECK_DIR/lib.sh"
check "bin/greet is executable" test -x bin/greet -a -f bin/greet
expect_eq "it starts with a shebang" '#!' "$(head -c 2 bin/greet 2>/dev/null)"
expect_eq "./bin/greet Alice" "Hello, Alice!" "$(run_agent ./bin/greet Alice)"
expect_eq "./bin/greet with no argument" "Hello, world!" "$(run_agent ./bin/greet)"
expect_eq "./bin/greet 'Ada Lovelace'" "Hello, Ada Lovelace!" "$(run_agent ./bin/greet 'Ada Lovelace')"
expect_eq "it runs from another directory" "Hello, Bob!" "$(cd "$SCRATCH" && run_agent "$OLDPWD/bin/greet" Bob)"
finish
