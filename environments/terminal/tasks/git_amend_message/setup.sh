mkdir repo && cd repo && git init -q -b main
t=0
commit() {
  t=$((t + 1))
  d="2024-01-15T12:$(printf %02d "$t"):00+00:00"
  GIT_AUTHOR_DATE=$d GIT_COMMITTER_DATE=$d git commit -q -m "$1"
}
printf '# Tool\nThis tool is grat.\n' > README.md
git add -A && commit "Add README"
printf 'print(1)\n' > tool.py
git add -A && commit "Add tool"
sed -i 's/grat/great/' README.md
git add -A && commit "Fix tpyo in README"
