. "$CHECK_DIR/lib.sh"
expect_file "errors_by_hour.txt counts the ERROR lines per hour" errors_by_hour.txt '08 1
09 2
13 3
21 1'
finish
