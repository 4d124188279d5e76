. "$CHECK_DIR/lib.sh"
expect_file "active_emails.txt lists the active users' emails" active_emails.txt 'ann@example.com
cy@example.com
flo@example.com'
finish
