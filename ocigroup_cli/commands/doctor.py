"""`ocigroup doctor`: check what stands between the active profile and a working command (ops/doctor.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.options import OutputOption, fmt, globals_of, load_profile
from ocigroup_cli.errors import ExitCode, OcigroupError

if TYPE_CHECKING:
    from ocigroup_cli.config import Profile
    from ocigroup_cli.ops.check import Check

WriteProbes = Annotated[
    bool,
    typer.Option(
        "--write-probes",
        help="Also probe what only a write shows (PutObject, PostMetricData): one probe object, deleted again where "
        "the bucket's retention allows, and one datapoint of ocigroup_doctor_probe. Never a message.",
    ),
]


def doctor(ctx: typer.Context, write_probes: WriteProbes = False, output: OutputOption = None) -> None:
    """Check the active profile in order: the key (readable, not by others, pass phrase, fingerprint), the endpoint
    (resolves, TLS, clock skew), authentication, then each IAM permission the commands need, probed without side
    effects. One line each: OK, FAIL, WARN or SKIPPED, and for a FAIL its fix (for a missing permission, the policy
    statement that grants it, narrowest first). Exit 0 when nothing FAILs, 1 when something does.

    Example: ocigroup doctor --profile prod
    """
    from ocigroup_cli.ops.check import FAIL, Check
    from ocigroup_cli.ops.doctor import Doctor

    form = fmt(ctx, output)
    checks: list[Check] = []
    structured = form != "table"  # json or yaml: one document at the end
    show = (lambda c: None) if structured else _line
    try:
        profile = load_profile(ctx)
    except OcigroupError as exc:
        checks.append(Check("profile", FAIL, exc.message, exc.hint))
        show(checks[-1])
    else:
        real = globals_of(ctx).clock  # the clock check is against real time, even with a test-mode emulator
        if profile.local:
            _provision(ctx, profile)
        for check in Doctor(profile, real, write_probes).run():
            checks.append(check)
            show(check)
    failed = [c for c in checks if c.status == FAIL]
    if structured:
        statements = [c.statements[0] for c in failed if c.statements]
        data = {"ok": not failed, "checks": [c.json() for c in checks], "statements": statements}
        console.emit(data, form)
    elif failed:
        console.data_line(f"{len(failed)} check(s) failed.")
    if failed:
        raise typer.Exit(ExitCode.FAILURE)


def _line(check: Check) -> None:
    console.data_line(console.visible(f"{check.status:<8}{check.id:<16}{check.detail}"))
    if check.fix:
        label = "fix:" if check.status != "SKIPPED" else "if needed:"
        console.data_line(console.visible(f"{'':<24}{label} {check.fix}"))


def _provision(ctx: typer.Context, profile: Profile) -> None:
    """The local profile makes its emulator, key and stream on first use, as every command does."""
    from ocigroup_cli.cli.options import session

    s = session(ctx, profile)
    try:
        _ = s.stream
    finally:
        s.close()
