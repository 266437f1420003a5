# Writes a 2 GiB sparse file into its scratch dir.
with open("big.bin", "wb") as f:
    f.seek(2 << 30)
    f.write(b"x")
