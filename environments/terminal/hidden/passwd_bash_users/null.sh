grep '/bin/bash' users.txt | cut -d: -f1 > bash_users.txt
