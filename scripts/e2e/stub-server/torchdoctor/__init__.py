"""Stand-in torchdoctor server for the extension's end-to-end test."""
