. "$CHECK_DIR/lib.sh"
expect_file "answer.txt holds the hash of the commit that added LEGACY_TOKEN" answer.txt b89e84e73cf32ba10d9e0a614e742351281c11c5
finish
