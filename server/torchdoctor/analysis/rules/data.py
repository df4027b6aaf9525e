"""Rules of the data family (see DESIGN.md §3)."""
