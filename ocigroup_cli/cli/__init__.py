"""The command line's frame, shared by every command: the lazy command table (`lazy.py`: a command's module is
imported when it runs) and the global options, the profile and session a command opens, and the output format
(`options.py`). Imports ops/, core/ and the console; never a command."""
