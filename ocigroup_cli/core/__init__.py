"""Pure domain logic: standard library only, no I/O, no wall-clock reads (time is injected)."""
