"""Rules of the evaluation family (see DESIGN.md §3)."""
