mkdir repo && cd repo && git init -q -b main
t=0
commit() {
  t=$((t + 1))
  d="2024-01-15T12:$(printf %02d "$t"):00+00:00"
  GIT_AUTHOR_DATE=$d GIT_COMMITTER_DATE=$d git commit -q -m "$1"
}
cat > pager.py <<'PY'
def page(items, size):
    pages = []
    for start in range(0, len(items) - 1, size):
        pages.append(items[start:start + size])
    return pages
PY
printf 'pager\n' > README.md
git add -A && commit "Add pager"
git checkout -q -b hotfix
printf 'DEBUG = True\n' > settings.py
git add -A && commit "Turn on debug logging"
sed -i 's/len(items) - 1/len(items)/' pager.py
git add -A && commit "Fix off-by-one in pager"
printf 'pager\n\nExperimental: infinite scroll\n' > README.md
git add -A && commit "Document infinite scroll (experimental)"
git checkout -q main
printf 'MIT\n' > LICENSE
git add -A && commit "Add license"
