# counts the directory logs/web/archive.log too
find logs -name '*.log' | wc -l > count.txt
