. "$CHECK_DIR/lib.sh"
check "rotate.sh is executable" test -x rotate.sh -a -f rotate.sh
make_dir() {  # a fresh directory: names sort differently from their ages
  local d i=0
  d=$(mktemp -d -p "$SCRATCH")
  for name in "z oldest.bak" m.bak a-newest.bak q.bak; do
    i=$((i + 1))
    echo "$name" > "$d/$name"
    touch -d "2023-0$i-01 00:00:00" "$d/$name"
  done
  echo keep > "$d/notes.txt"
  echo keep > "$d/old.bak.txt"
  mkdir "$d/sub.bak"
  echo keep > "$d/sub.bak/inner.bak"
  touch -d "2020-01-01" "$d/sub.bak/inner.bak" "$d/notes.txt" "$d/old.bak.txt"
  echo "$d"
}
d=$(make_dir)
run_agent ./rotate.sh "$d" 2 >/dev/null
expect_eq "keeps the 2 newest .bak files and the rest" 'a-newest.bak
notes.txt
old.bak.txt
q.bak
sub.bak/inner.bak' "$(file_list "$d")"
d=$(make_dir)
run_agent ./rotate.sh "$d" 0 >/dev/null
expect_eq "N=0 deletes every .bak file" 'notes.txt
old.bak.txt
sub.bak/inner.bak' "$(file_list "$d")"
d=$(make_dir)
run_agent ./rotate.sh "$d" 10 >/dev/null
expect_eq "N larger than the count deletes nothing" 'a-newest.bak
m.bak
notes.txt
old.bak.txt
q.bak
sub.bak/inner.bak
z oldest.bak' "$(file_list "$d")"
finish
