# the newest commit that changed the count, not the first
git -C repo log -S LEGACY_TOKEN --format=%H | head -n 1 > answer.txt
