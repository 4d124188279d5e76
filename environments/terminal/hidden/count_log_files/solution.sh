find logs -type f -name '*.log' | wc -l > count.txt
