find srv -type f -perm -o+w | LC_ALL=C sort > world_writable.txt
# ---
xargs -d '\n' chmod o-w < world_writable.txt
cat world_writable.txt
