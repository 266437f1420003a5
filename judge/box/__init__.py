"""The sandbox client: opens a locked-down child from the warm zygote and talks to it."""
