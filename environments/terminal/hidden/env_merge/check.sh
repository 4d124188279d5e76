. "$CHECK_DIR/lib.sh"
expect_file ".env merges both files, overrides winning, keys sorted" .env 'APP_NAME=shop
CACHE_TTL=300
DATABASE_URL=postgres://db.prod/shop?sslmode=require
FEATURE_FLAGS=a=1,b=0
LOG_LEVEL=warning
SENTRY_DSN=https://key@sentry.example.com/1'
finish
