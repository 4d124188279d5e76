# keeps both copies of the overridden keys
cat defaults.env overrides.env | grep -v '^#' | grep -v '^$' | LC_ALL=C sort -u > .env
