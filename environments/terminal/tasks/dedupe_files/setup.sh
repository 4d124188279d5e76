mkdir -p files/2023 files/2024/q1 files/misc
printf 'alpha report\n' > files/2024/q1/report.txt
printf 'alpha report\n' > files/2023/report.txt
printf 'alpha report\n' > 'files/misc/copy of report.txt'
printf 'beta\n' > files/misc/b1.txt
printf 'beta\n' > files/b0.txt
printf 'gamma\n' > files/2023/g.txt
printf 'delta\n' > files/misc/d.txt
printf 'Beta\n' > files/misc/b2.txt
printf 'zeta\n' > files/2024/z.txt
printf 'eta\n' > files/2024/e.txt
