cd repo
git status --short
# ---
git diff greeting.txt
# ---
printf 'Hello\nWelcome to main\nWelcome to the feature branch\nBye\n' > greeting.txt
git add greeting.txt
git commit -q --no-edit
# ---
git log --oneline --graph
