. "$CHECK_DIR/lib.sh"
want='build.tmp/output.bin
config.tmpl
docs/guide.md
docs/notes~old.txt
src/main.c
src/util/helper.c'
expect_eq "only the .tmp and ~ files are gone" "$want" "$(file_list project)"
check "the directory build.tmp stays" test -d project/build.tmp
finish
