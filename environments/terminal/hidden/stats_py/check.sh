. "$CHECK_DIR/lib.sh"
check "stats.py exists" test -f stats.py
py() { printf '%b' "$1" | run_program 10 python3 stats.py 2>/dev/null; }
expect_eq "the example" "count=6 min=4.00 max=42.00 mean=18.00" "$(py '4\n 8 \n\n15\n16\n23\n42\n')"
expect_eq "decimals and negatives" "count=3 min=-2.50 max=1.25 mean=-0.25" "$(py '-2.5\n1.25\n0.5\n')"
expect_eq "a mean that is not whole" "count=3 min=1.00 max=2.00 mean=1.33" "$(py '1\n1\n2')"
expect_eq "blank lines only" "count=0" "$(py '\n  \n')"
expect_eq "no input" "count=0" "$(py '')"
finish
