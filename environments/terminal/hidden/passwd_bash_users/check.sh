. "$CHECK_DIR/lib.sh"
expect_file "bash_users.txt lists root, alice and dave" bash_users.txt 'root
alice
dave'
finish
