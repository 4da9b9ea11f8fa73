"""CLI translation: parse flags, call ops (or the emulator), render. The only place besides app/console
that knows Typer and Rich."""
