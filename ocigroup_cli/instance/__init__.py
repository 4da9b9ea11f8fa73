"""Being one instance of a consumer group: join, heartbeat, read, hand the messages on, commit, leave cleanly on a
rebalance (`member`); `tail` writes them out, `worker` runs a command for each (`crew`, `command`, `deadletter`:
nothing committed before its work is done); `peek` reads without joining; `dataloss` says what retention took.
Imports ops/, client/ and core/; never a command, the console or an engine."""
