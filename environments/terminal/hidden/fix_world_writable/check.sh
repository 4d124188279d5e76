. "$CHECK_DIR/lib.sh"
mode() { stat -c %a "$1" 2>/dev/null; }
expect_file "world_writable.txt lists the world-writable files" world_writable.txt 'srv/app/bin/tool
srv/app/config.ini
srv/shared/drop.txt
srv/www/index.html'
expect_eq "srv/www/index.html: 666 -> 664" 664 "$(mode srv/www/index.html)"
expect_eq "srv/app/bin/tool: 777 -> 775" 775 "$(mode srv/app/bin/tool)"
expect_eq "srv/app/config.ini: 602 -> 600" 600 "$(mode srv/app/config.ini)"
expect_eq "srv/shared/drop.txt: 646 -> 644" 644 "$(mode srv/shared/drop.txt)"
expect_eq "srv/www/uploads/a.png untouched" 644 "$(mode srv/www/uploads/a.png)"
expect_eq "srv/shared/notes.txt untouched" 640 "$(mode srv/shared/notes.txt)"
expect_eq "srv/app/readme untouched" 664 "$(mode srv/app/readme)"
expect_eq "the directory srv/shared is not a file: untouched" 777 "$(mode srv/shared)"
finish
