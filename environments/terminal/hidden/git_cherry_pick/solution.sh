cd repo
git log --oneline main..hotfix
# ---
git cherry-pick "$(git log --format=%H --grep='^Fix off-by-one in pager$' hotfix)"
