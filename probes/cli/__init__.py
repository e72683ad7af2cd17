"""The `probe` command line: one module per command group (`main` holds the top-level group),
one error class and one exit-code table (`errors`)."""
