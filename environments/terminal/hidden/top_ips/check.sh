. "$CHECK_DIR/lib.sh"
expect_file "top_ips.txt holds the three busiest addresses, ties by address" top_ips.txt '7 10.0.0.5
5 10.0.0.12
5 172.16.0.3'
finish
