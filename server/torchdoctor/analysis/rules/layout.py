"""Rules of the layout family (see DESIGN.md §3)."""
