. "$CHECK_DIR/lib.sh"
want='2023/g.txt
2023/report.txt
2024/e.txt
2024/z.txt
b0.txt
misc/b2.txt
misc/d.txt'
expect_eq "files/ keeps one file per content, the first path of each group" "$want" "$(file_list files)"
expect_file "removed.txt lists the deleted paths" removed.txt 'files/2024/q1/report.txt
files/misc/b1.txt
files/misc/copy of report.txt'
expect_file "files with the same size but other contents stay (b2.txt)" files/misc/b2.txt Beta
finish
