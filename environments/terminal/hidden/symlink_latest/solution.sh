latest=$(ls releases | sort -V | tail -n 1)
echo "$latest"
# ---
ln -s "releases/$latest" current
