. "$CHECK_DIR/lib.sh"
same() { cmp -s "$1" <(printf "$2"); }
check "todo.txt has LF endings" same notes/todo.txt 'shopping list\n- milk\n- eggs\n'
check "meeting.txt has LF endings, blank line kept" same notes/2024/meeting.txt 'meeting notes\nattendees: 3\n\nend\n'
check "draft.txt converted, still no final newline" same notes/2024/draft.txt 'no final newline\nsecond line'
check "blob.dat untouched" same notes/blob.dat 'binary\r\n\000\001\r\n'
check "run.bat untouched" same notes/run.bat 'windows script\r\n'
finish
