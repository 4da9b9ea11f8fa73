"""Use cases as plain typed functions returning data; no Typer, no Rich. Imports client/ and core/."""
