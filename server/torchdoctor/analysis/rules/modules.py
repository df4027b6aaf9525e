"""Rules of the modules family (see DESIGN.md §3)."""
