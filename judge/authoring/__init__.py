"""For exercise authors: validate, mutate, scaffold, export."""
