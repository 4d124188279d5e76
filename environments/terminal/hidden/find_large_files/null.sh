# "10 KiB" read as 10000 bytes: data/b.bin (exactly 10240 bytes) slips in
find data -type f -size +10000c | LC_ALL=C sort > large_files.txt
