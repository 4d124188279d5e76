cd repo && git commit -q --allow-empty -m "Fix typo in README"
