"""The `probe` command line: one module per command group (`main` holds the top-level group),
one error class and one exit-code table (`errors`).

Each command imports its machinery inside its function, when it runs: `probe --help` and a
command's own `--help` stay light (no numpy, no torch). The CLI is the top of the import arrows
(docs/design.md): nothing below imports it, so none of these local imports dodges a cycle.
"""
