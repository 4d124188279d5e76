cd repo && git merge -q --no-edit hotfix
