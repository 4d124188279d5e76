. "$CHECK_DIR/lib.sh"
expect_file "eu_total.txt holds the EU total (1575)" eu_total.txt 1575
finish
