"""What commands show and where they send it, apart from the commands themselves: tail's lines (`lines.py`),
inspect's fleet view (`all_groups.py`), a watch through an outage (`outage.py`) and the metrics sinks
(`sinks.py`: stdout, a textfile, a scrape target, OCI Monitoring). Imports cli/, ops/, core/ and the console;
never a command, the client or an engine."""
