"""Rules of the api family (see DESIGN.md §3)."""
