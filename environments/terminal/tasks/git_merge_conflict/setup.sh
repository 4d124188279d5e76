mkdir repo && cd repo && git init -q -b main
t=0
commit() {
  t=$((t + 1))
  d="2024-01-15T12:$(printf %02d "$t"):00+00:00"
  GIT_AUTHOR_DATE=$d GIT_COMMITTER_DATE=$d git commit -q -m "$1"
}
printf 'Hello\nWelcome to the project\nBye\n' > greeting.txt
printf 'v1\n' > VERSION
git add -A && commit "Add greeting"
git checkout -q -b feature
sed -i 's/Welcome to the project/Welcome to the feature branch/' greeting.txt
printf 'feature notes\n' > FEATURE.md
git add -A && commit "Reword the welcome on feature"
git checkout -q main
sed -i 's/Welcome to the project/Welcome to main/' greeting.txt
printf 'v2\n' > VERSION
git add -A && commit "Reword the welcome on main"
if git merge -q feature >/dev/null 2>&1; then echo "the merge should have conflicted" >&2; exit 1; fi
test -f .git/MERGE_HEAD
