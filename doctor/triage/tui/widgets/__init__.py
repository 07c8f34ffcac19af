"""One module per widget of the triage TUI; each draws rows computed by ``tui.view``."""
