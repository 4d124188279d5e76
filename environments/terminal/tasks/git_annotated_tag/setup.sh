mkdir repo && cd repo && git init -q -b main
t=0
commit() {
  t=$((t + 1))
  d="2024-01-15T12:$(printf %02d "$t"):00+00:00"
  GIT_AUTHOR_DATE=$d GIT_COMMITTER_DATE=$d git commit -q -m "$1"
}
printf '1.1.0\n' > VERSION
git add -A && commit "Release 1.1.0"
git tag -a v1.1.0 -m "Release 1.1.0"
printf 'fix\n' > fix.txt
git add -A && commit "Fix crash on empty input"
printf '1.2.0\n' > VERSION
git add -A && commit "Bump version to 1.2.0"
printf 'next\n' > next.txt
git add -A && commit "Start 1.3 development"
printf 'more\n' >> next.txt
git add -A && commit "Add more for 1.3"
