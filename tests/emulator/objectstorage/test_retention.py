"""Retention rules, enforced as Oracle documents them: a time-bound rule protects each object from overwrite and
delete for its duration from the object's last-modified time (on the emulator's clock), an indefinite one until it
is deleted, and a locked rule cannot be deleted."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.emulator.objectstorage.test_storage import COMPARTMENT, M, refused, storage_client

DAY_MS = 86_400_000


@pytest.fixture
def osc(emulator, api_key):
    client = storage_client(emulator.url, api_key)
    client.create_bucket("emulator", M.CreateBucketDetails(name="vault", compartment_id=COMPARTMENT))
    return client


def rule(osc, amount=None, unit="DAYS", **kw):
    duration = None if amount is None else M.Duration(time_amount=amount, time_unit=unit)
    return osc.create_retention_rule("emulator", "vault", M.CreateRetentionRuleDetails(duration=duration, **kw)).data


def assert_protected(call) -> str:
    error = refused(call)
    assert (error.status, error.code) == (409, "Conflict"), error
    assert "protected by retention rule" in error.message
    return error.message


def test_a_time_bound_rule_refuses_overwrite_and_delete_until_its_duration_passes(osc, clock):
    osc.put_object("emulator", "vault", "exports/a", b"evidence")
    made = rule(osc, 1, "DAYS", display_name="one-day")
    assert (made.display_name, made.duration.time_amount, made.duration.time_unit) == ("one-day", 1, "DAYS")
    message = assert_protected(lambda: osc.put_object("emulator", "vault", "exports/a", b"altered"))
    assert "one-day" in message and made.id in message
    assert_protected(lambda: osc.delete_object("emulator", "vault", "exports/a"))
    assert osc.get_object("emulator", "vault", "exports/a").data.content == b"evidence"
    osc.put_object("emulator", "vault", "exports/new", b"a new name is always allowed")

    clock.advance_ms(DAY_MS - 1000)  # still within the day since it was last modified
    assert_protected(lambda: osc.delete_object("emulator", "vault", "exports/a"))
    clock.advance_ms(1000)
    osc.put_object("emulator", "vault", "exports/a", b"rewritten once the day passed")
    assert_protected(lambda: osc.delete_object("emulator", "vault", "exports/a"))  # its own day starts again
    clock.advance_ms(DAY_MS)
    assert osc.delete_object("emulator", "vault", "exports/a").status == 204


def test_a_rule_protects_by_each_objects_last_modified_time(osc, clock):
    osc.put_object("emulator", "vault", "old", b"old")
    clock.advance_ms(2 * DAY_MS)
    osc.put_object("emulator", "vault", "recent", b"recent")
    rule(osc, 1, "DAYS")
    assert osc.delete_object("emulator", "vault", "old").status == 204  # modified longer ago than the duration
    assert_protected(lambda: osc.delete_object("emulator", "vault", "recent"))


def test_an_indefinite_rule_refuses_until_it_is_deleted(osc, clock):
    osc.put_object("emulator", "vault", "held", b"x")
    hold = rule(osc, display_name="legal-hold")
    assert hold.duration is None and hold.time_rule_locked is None
    clock.advance_ms(3650 * DAY_MS)
    message = assert_protected(lambda: osc.delete_object("emulator", "vault", "held"))
    assert "until the rule is deleted" in message
    assert_protected(lambda: osc.put_object("emulator", "vault", "held", b"y"))
    assert osc.delete_retention_rule("emulator", "vault", hold.id).status == 204
    assert osc.delete_object("emulator", "vault", "held").status == 204


def test_a_multipart_commit_over_a_protected_object_is_refused(osc):
    osc.put_object("emulator", "vault", "m", b"original")
    rule(osc, 1, "YEARS")
    upload = osc.create_multipart_upload("emulator", "vault", M.CreateMultipartUploadDetails(object="m")).data
    etag = osc.upload_part("emulator", "vault", "m", upload.upload_id, 1, b"replacement").headers["etag"]
    details = M.CommitMultipartUploadDetails(
        parts_to_commit=[M.CommitMultipartUploadPartDetails(part_num=1, etag=etag)]
    )
    assert_protected(lambda: osc.commit_multipart_upload("emulator", "vault", "m", upload.upload_id, details))
    assert osc.get_object("emulator", "vault", "m").data.content == b"original"


def test_rules_are_listed_got_locked_and_validated(osc, clock):
    now = dt.datetime.fromtimestamp(clock.time_ms() / 1000, dt.UTC)
    first = rule(osc, 30, "DAYS", display_name="first")
    clock.advance_ms(1000)
    locked = rule(osc, 7, "YEARS", display_name="locked", time_rule_locked=now + dt.timedelta(days=15))
    listed = osc.list_retention_rules("emulator", "vault").data.items
    assert [r.display_name for r in listed] == ["locked", "first"]  # the most recently created first
    got = osc.get_retention_rule("emulator", "vault", first.id)
    assert (got.data.id, got.headers["etag"]) == (first.id, first.etag)
    assert locked.time_rule_locked == now + dt.timedelta(days=15)
    early = refused(lambda: rule(osc, 1, "DAYS", time_rule_locked=now + dt.timedelta(days=13)))
    assert (early.status, early.code) == (400, "InvalidParameter") and "14 days" in early.message
    hold = refused(lambda: rule(osc, time_rule_locked=now + dt.timedelta(days=20)))
    assert (hold.status, hold.code) == (400, "InvalidParameter")
    bad_unit = refused(lambda: rule(osc, 1, "WEEKS"))
    assert (bad_unit.status, bad_unit.code) == (400, "InvalidParameter")
    unknown = refused(lambda: osc.get_retention_rule("emulator", "vault", "0" * 32))
    assert unknown.status == 404
    assert refused(lambda: osc.list_retention_rules("emulator", "nope")).code == "BucketNotFound"

    assert osc.delete_retention_rule("emulator", "vault", locked.id).status == 204  # not locked yet
    relocked = rule(osc, 7, "YEARS", time_rule_locked=now + dt.timedelta(days=15))
    clock.advance_ms(16 * DAY_MS)
    stuck = refused(lambda: osc.delete_retention_rule("emulator", "vault", relocked.id))
    assert (stuck.status, stuck.code) == (409, "Conflict") and "locked" in stuck.message
