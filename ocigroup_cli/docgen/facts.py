"""What the man page says beyond the command tree: exit codes, environment, files and examples.

Kept next to the code they describe by tests: every ExitCode needs a meaning here, every environment variable the
package reads must be listed, every file it keeps in the state directory too, and every example must parse.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocigroup_cli.errors import ExitCode

EXIT_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "Success.",
    ExitCode.FAILURE: "The operation failed (service error, not found, refused).",
    ExitCode.USAGE: "Usage or configuration error (bad flag, bad profile).",
    ExitCode.INTERNAL: "Internal error (a bug): one line on stderr, details in the crash log (see FILES).",
    ExitCode.TRANSIENT: "Transient service or network failure; retrying may succeed.",
    ExitCode.THRESHOLD: "A --fail-on-* threshold of inspect was crossed (for cron alerts).",
    ExitCode.DATA_LOST: "tail: messages left the stream's retention before the group read them; the group must be "
    "moved on (the error names the reset command), or run tail with --on-data-loss resume.",
    ExitCode.COMMAND_FAILED: "tail --exec: the command failed for a message after its retries (--on-failure stop); "
    "nothing at or past that message was committed.",
    ExitCode.INTERRUPTED: "Interrupted by SIGINT or SIGTERM, or the output pipe was closed; "
    "tail stops cleanly and commits only what it wrote.",
}


def exit_codes() -> list[tuple[int, str]]:
    missing = [code.name for code in ExitCode if code not in EXIT_MEANINGS]
    if missing:
        raise ValueError(f"docgen.facts.EXIT_MEANINGS has no meaning for {', '.join(missing)}")
    return [(int(code), EXIT_MEANINGS[code]) for code in ExitCode]


def environment() -> list[tuple[str, str]]:
    """(variable, meaning): the fixed ones, then one OCIGROUP_<KEY> per profile setting."""
    from ocigroup_cli.config import SCHEMA, env_name
    from ocigroup_cli.localhost import LOCAL_PORT

    fixed = [
        ("OCIGROUP_CONFIG", "Profile file, when --config is not given."),
        ("OCIGROUP_PROFILE", "Profile name, when --profile is not given."),
        ("OCIGROUP_STATE_DIR", "State directory (see FILES)."),
        ("OCIGROUP_LOCAL_PORT", f"Port of the bundled emulator used by the local profile (default {LOCAL_PORT})."),
        ("XDG_CONFIG_HOME", "Base of the default profile file location (default ~/.config)."),
        ("XDG_STATE_HOME", "Base of the default state directory (default ~/.local/state)."),
        ("NO_COLOR", "When set, nothing is coloured and no escape sequence is written."),
        ("TERM", "dumb (or unknown): no escape sequences, as with NO_COLOR."),
        ("FORCE_COLOR", "Set and not empty: colour and escape sequences even where output is not a terminal."),
        ("TTY_COMPATIBLE", "1: output is treated as a terminal, as with FORCE_COLOR; 0: never as one."),
        ("COLUMNS", "Width to draw tables and help at (else the terminal's own width)."),
        ("https_proxy", "Proxy (http://[user:password@]host:port) for https endpoints; HTTPS_PROXY too."),
        ("http_proxy", "Proxy for plain http endpoints that are not loopback; HTTP_PROXY too."),
        ("all_proxy", "Proxy when the scheme's own variable is not set; ALL_PROXY too."),
        ("no_proxy", "Hosts and domain suffixes reached directly (comma-separated; * for all); loopback always is."),
        ("OCI_CLI_CERT_BUNDLE", "CA bundle for HTTPS when the profile sets no cert_bundle (as for the oci CLI)."),
        ("REQUESTS_CA_BUNDLE", "CA bundle for HTTPS when neither the profile nor OCI_CLI_CERT_BUNDLE names one."),
        ("OCI_REGION_METADATA", "One more region, described as for the oci CLI (dedicated regions)."),
        ("OCI_DEFAULT_REALM", "Domain of regions that are in no table (as for the oci SDK)."),
        ("JAVA_HOME", "The Java installation export runs Spark with (else java on PATH)."),
        ("SPARK_HOME", "The Spark installation export uses (else the installed pyspark package)."),
        ("PYSPARK_GATEWAY_PORT", "Set by spark-submit for the job it runs: export then uses spark-submit's master."),
        ("_OCIGROUP_COMPLETE", "Set by the shell completion scripts when they call ocigroup back; not for users."),
    ]
    given = "Set for a tail --exec command (never read from ocigroup's own environment):"
    fixed += [
        ("OCIGROUP_STREAM", f"{given} the stream's name."),
        ("OCIGROUP_GROUP", f"{given} the consumer group."),
        ("OCIGROUP_INSTANCE", f"{given} the instance name tail joined as."),
        ("OCIGROUP_PARTITION", f"{given} the partition of its message(s)."),
        ("OCIGROUP_OFFSET", f"{given} its message's offset (one message per run)."),
        ("OCIGROUP_TIMESTAMP", f"{given} its message's time, UTC ISO 8601 (one message per run)."),
        ("OCIGROUP_KEY", f"{given} its message's key in base64; absent for a message without one."),
        ("OCIGROUP_ATTEMPT", f"{given} 1 for the first run of its message(s), 2 for the first retry, and so on."),
        ("OCIGROUP_FIRST_OFFSET", f"{given} the first message's offset (--exec-batch)."),
        ("OCIGROUP_LAST_OFFSET", f"{given} the last message's offset (--exec-batch)."),
        ("OCIGROUP_COUNT", f"{given} how many messages are on its stdin (--exec-batch)."),
    ]
    settings = []
    for key, spec in SCHEMA.items():
        shown = str(spec.default).lower() if isinstance(spec.default, bool) else spec.default
        default = f" (default: {shown})" if spec.default is not None else ""
        settings.append((env_name(key), f"Profile setting {key}: {spec.help}{default}. Overrides the profile file."))
    return fixed + settings


@dataclass(frozen=True)
class File:
    path: str
    meaning: str


FILES = (
    File(
        "$OCIGROUP_CONFIG, else $XDG_CONFIG_HOME/ocigroup/config.yaml (~/.config/ocigroup/config.yaml)",
        "The profile file (YAML): a 'profiles' mapping and an optional 'default' profile name.",
    ),
    File(
        "$OCIGROUP_STATE_DIR, else $XDG_STATE_HOME/ocigroup (~/.local/state/ocigroup)",
        "The state directory. It holds the files below.",
    ),
    File("emulator.db", "The emulator's data (SQLite, WAL), the default of emulator serve --data."),
    File("emulator.db.objects/", "The bytes of the emulator's Object Storage objects (beside any --data file)."),
    File("emulator.log", "Log of the background emulator (emulator start)."),
    File("local/key.pem, local/key_public.pem", "The local profile's API key pair, made on first use (mode 0600)."),
    File("local/lock", "Taken while the local profile makes its key pair, emulator and stream (first use)."),
    File("streams.json", "Cached stream locations (OCID, partitions, messages endpoint)."),
    File("test-clocks.json", "Endpoints known to be emulators in test mode, whose clock gives the ages and lags."),
    File("resets/", "A JSON record of every reset --execute."),
    File(
        "exports/",
        "The claims of exports to Object Storage running from here (one lock per prefix), and their "
        "readers' row counts.",
    ),
    File("logs/", "Logs of the Spark jobs run by export and of the warm Spark engine."),
    File(
        "engine/",
        "The warm Spark engine's record (port, pid, session) per interpreter, versions and master, its lock and "
        "the time of its last use; the engine stops after export.idle_minutes without one.",
    ),
    File(
        "cache/",
        "The Spark JVM's class archive, recorded by the first export so later ones start sooner; safe to delete.",
    ),
    File(
        "groups.json",
        "The groups that exist and were used from here, per stream, with when: `groups list`, and a did-you-mean for a "
        "mistyped one.",
    ),
    File(
        "instances/",
        "Locks naming the group instances running on this host (only where abstract Unix sockets are missing: on "
        "Linux the claim is a socket, and no file is left).",
    ),
    File("newest.json", "Where inspect last found each partition's newest message, probed first the next time."),
    File(
        "profiles.json",
        "The profile files parsed last (found by the SHA-256 of their bytes; readable by their owner only), so that "
        "a run whose file is unchanged need not load the YAML parser.",
    ),
    File(
        "looks.json",
        "inspect's last look at each group (counts, offsets and times, a cursor past each partition's newest "
        "message; no message values): the next run within 4 minutes reads on from there.",
    ),
    File(
        "health/",
        "Samples of inspect --health (the last 200 per stream and group), judged over --health-window.",
    ),
    File("crash.log", "Details of internal errors (exit status 3)."),
)


@dataclass(frozen=True)
class Example:
    what: str
    command: str  # without the leading "ocigroup"; must parse against the command tree


EXAMPLES = (
    Example(
        "Publish two messages with the built-in local profile (starts the bundled emulator):", "publish hello world"
    ),
    Example("Read group demo as instance me up to the end of the stream, then stop:", "tail demo --instance me -e"),
    Example("Owners, committed offsets, lag and balance of a group:", "inspect demo"),
    Example(
        "A cron check that exits 5 when the group falls behind:",
        "-p prod inspect billing --fail-on-lag 10000 --fail-on-time-lag 15m -o json",
    ),
    Example("Plan a reset to the oldest retained message (nothing changes):", "reset demo --to earliest"),
    Example("Move a group back two hours, without a prompt:", "reset billing --by-duration 2h --execute --yes"),
    Example("A group cursor for scripts:", "cursor create billing --instance worker-1 --type LATEST"),
    Example(
        "Serve the emulator for the oci SDK or CLI in the foreground:",
        "emulator serve --port 18418 --trusted-key ~/.oci/oci_api_key_public.pem",
    ),
    Example("Stop the background emulator:", "emulator stop"),
    Example("Every resolved setting and where it came from:", "profile show"),
)
