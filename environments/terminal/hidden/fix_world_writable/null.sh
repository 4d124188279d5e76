# right list, but chmod 644 resets the other bits
find srv -type f -perm -o+w | LC_ALL=C sort > world_writable.txt
xargs -d '\n' chmod 644 < world_writable.txt
