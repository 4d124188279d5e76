cd repo
# ---
git commit -q --amend -m "Fix typo in README"
git log --oneline
