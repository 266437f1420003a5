# Writes a file outside the scratch dir (and into the checkout).
for path in ["{{TARGET}}", "{{REPO}}/pwned.txt"]:
    with open(path, "w") as f:
        f.write("pwned")
