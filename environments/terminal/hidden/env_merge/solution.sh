cat defaults.env overrides.env | grep -v '^#' | grep -v '^$' | awk '{ key = substr($0, 1, index($0, "=") - 1); value[key] = $0 } END { for (k in value) print value[k] }' | LC_ALL=C sort > .env
cat .env
