"""One use case per file: a verb-noun class with `execute(command)`."""
