# reverts the latest commit instead
cd repo && git revert --no-edit HEAD
