find data -type f -size +10240c | LC_ALL=C sort > large_files.txt
