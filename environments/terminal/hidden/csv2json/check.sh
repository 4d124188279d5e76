. "$CHECK_DIR/lib.sh"
check "csv2json.py exists" test -f csv2json.py
same_json() {  # same_json FILE_OR_TEXT WANT: both parse to the same JSON value
  python3 -c 'import json, sys; sys.exit(0 if json.loads(sys.argv[1]) == json.loads(sys.argv[2]) else 1)' "$1" "$2"
}
want_example='[{"id": "1", "name": "Ann", "city": "Oslo"}, {"id": "2", "name": "Smith, Bob", "city": "New York"}]'
check "example.json holds the example's rows" same_json "$(cat example.json 2>/dev/null)" "$want_example"
cd "$SCRATCH" || exit 1
printf 'sku,desc,qty\nA-1,"a ""quoted"" word",3\nB-2,"two\nlines",0\nC-3,,7\n' > tricky.csv
out=$(run_agent python3 "$WORKSPACE/csv2json.py" tricky.csv)
check "quotes, embedded newlines and empty fields" same_json "$out" \
  '[{"sku": "A-1", "desc": "a \"quoted\" word", "qty": "3"}, {"sku": "B-2", "desc": "two\nlines", "qty": "0"}, {"sku": "C-3", "desc": "", "qty": "7"}]'
printf 'h\n' > empty.csv
check "a header with no rows gives []" same_json "$(run_agent python3 "$WORKSPACE/csv2json.py" empty.csv)" '[]'
finish
