. "$CHECK_DIR/lib.sh"
expect_file "count.txt holds the number of .log files (8)" count.txt 8
finish
