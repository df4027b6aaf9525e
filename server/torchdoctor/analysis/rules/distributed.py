"""Rules of the distributed family (see DESIGN.md §3)."""
