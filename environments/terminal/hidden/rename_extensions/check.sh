. "$CHECK_DIR/lib.sh"
want='2023 holiday - day 1.jpg
beach.jpg
cat.jpg
family trip.jpg
notes.txt
old.jpeg.bak
sunset.jpg'
expect_eq "photos/ holds exactly the renamed files and the others" "$want" "$(file_list photos)"
for n in beach "family trip" sunset "2023 holiday - day 1"; do
  expect_file "photos/$n.jpg kept its content" "photos/$n.jpg" "$n"
done
expect_file "old.jpeg.bak is untouched" photos/old.jpeg.bak backup
finish
