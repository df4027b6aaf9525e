"""The language server: a thin pygls 2.x adapter that turns the analysis engine's findings into
diagnostics, hovers, code actions and CodeLens. No rule logic lives here."""
