git -C repo log -S LEGACY_TOKEN --reverse --format=%H | head -n 1 > answer.txt
cat answer.txt
