"""See the package docstring in the module files."""
