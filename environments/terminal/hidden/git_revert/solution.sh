cd repo
git log --oneline
# ---
git revert --no-edit "$(git log --format=%H --grep='^Add debug logging$')"
