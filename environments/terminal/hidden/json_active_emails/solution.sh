python3 -c '
import json
users = json.load(open("users.json"))
emails = sorted({u["email"].lower() for u in users if u.get("active") is True})
print("\n".join(emails))
' > active_emails.txt
cat active_emails.txt
