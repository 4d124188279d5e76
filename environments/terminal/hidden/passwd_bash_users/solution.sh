awk -F: '$7 == "/bin/bash" { print $1 }' users.txt > bash_users.txt
