mkdir -p notes/2024
printf 'shopping list\r\n- milk\r\n- eggs\r\n' > notes/todo.txt
printf 'meeting notes\r\nattendees: 3\r\n\r\nend\r\n' > notes/2024/meeting.txt
printf 'no final newline\r\nsecond line' > notes/2024/draft.txt
printf 'binary\r\n\000\001\r\n' > notes/blob.dat
printf 'windows script\r\n' > notes/run.bat
