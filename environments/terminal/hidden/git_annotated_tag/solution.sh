cd repo
commit=$(git log --format=%H --grep='^Bump version to 1.2.0$')
echo "$commit"
# ---
git tag -a v1.2.0 -m "Release 1.2.0" "$commit"
git show --no-patch v1.2.0
