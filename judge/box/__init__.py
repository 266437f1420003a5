"""The sandbox client: opens a locked-down child from the warm zygote and talks to it
(``sandbox``, ``job``), checking everything the child sends against one schema (``replies``)."""
