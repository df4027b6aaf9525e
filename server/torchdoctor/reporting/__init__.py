"""The CLI side of `check`: finding files, running the engine over them, printing results."""
