. "$CHECK_DIR/lib.sh"
mode() { stat -c %a "$1" 2>/dev/null; }
expect_eq "site/secret is 700" 700 "$(mode site/secret)"
expect_eq "site/secret/api.key is 600" 600 "$(mode site/secret/api.key)"
expect_eq "site/secret/db.pass is 600" 600 "$(mode site/secret/db.pass)"
for d in site/public site/public/css site/public/img; do expect_eq "$d is 755" 755 "$(mode $d)"; done
for f in site/public/index.html site/public/css/main.css site/public/img/logo.png; do expect_eq "$f is 644" 644 "$(mode $f)"; done
expect_eq "site/run.sh is 755" 755 "$(mode site/run.sh)"
expect_eq "site/NOTES.txt is unchanged (640)" 640 "$(mode site/NOTES.txt)"
expect_eq "site/secret/api.key kept its content" key "$(cat site/secret/api.key 2>/dev/null)"
finish
