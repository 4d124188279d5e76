. "$CHECK_DIR/lib.sh"
expect_file "app.conf: every occurrence replaced" config/app.conf '# app settings
db_host = db.new.internal
replica_hosts = db.new.internal:5433,db.new.internal:5434
cache_host = cache.internal'
expect_file "worker.conf replaced" config/services/worker.conf '[worker]
queue = jobs
database = postgres://app@db.new.internal/app'
expect_file "billing.conf replaced (nested)" config/services/billing/billing.conf 'upstream=db.new.internal
fallback=db.new.internal'
expect_file "the backup is untouched" config/app.conf.bak 'db_host = db.old.internal'
expect_file "the doc is untouched" config/docs/MIGRATION.md 'We are moving away from db.old.internal.'
expect_file "nginx.conf.disabled is untouched" config/services/nginx.conf.disabled 'proxy_pass http://db.old.internal;'
expect_eq "no file added or removed" 'app.conf
app.conf.bak
docs/MIGRATION.md
services/billing/billing.conf
services/nginx.conf.disabled
services/worker.conf' "$(file_list config)"
finish
