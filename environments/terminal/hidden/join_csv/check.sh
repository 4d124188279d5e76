. "$CHECK_DIR/lib.sh"
expect_file "report.csv joins names and departments, sorted by name" report.csv 'name,department
Adam Smith,Sales
Alan Turing,UNKNOWN
Beth Jones,Engineering
Li Wei,Sales
Maria Garcia,Engineering
Omar Haddad,UNKNOWN
Zoe Park,Support'
finish
