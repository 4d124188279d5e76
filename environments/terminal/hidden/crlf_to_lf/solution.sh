find notes -type f -name '*.txt' -exec sed -i 's/\r$//' {} +
