. "$CHECK_DIR/lib.sh"
expect_file "only [server] port changed" app.ini '; application settings
[metrics]
enabled = true
port = 9100

[server]
host = 0.0.0.0
port = 8443
; port = 80 was the old value
workers = 4

[database]
host = db.internal
port = 5432'
finish
