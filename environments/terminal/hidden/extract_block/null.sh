# keeps the marker lines and every block
sed -n '/BEGIN CONFIG/,/END CONFIG/p' firmware.txt > config_block.txt
