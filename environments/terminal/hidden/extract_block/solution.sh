awk '$0 == "END CONFIG" && inside { exit } inside { print } $0 == "BEGIN CONFIG" { inside = 1 }' firmware.txt > config_block.txt
cat config_block.txt
