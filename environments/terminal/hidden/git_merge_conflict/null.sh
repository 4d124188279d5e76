cd repo
# ---
git checkout --ours greeting.txt && git add greeting.txt && git commit -q --no-edit
