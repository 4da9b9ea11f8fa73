"""`tail --exec`'s bookkeeping (core/lanes.py): work goes out one piece per partition, in offset order, and the
cursor it offers to commit never carries a message whose work is not settled, whatever the reads, rejoins and
failures; plus the read sizing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from ocigroup_cli.core.lanes import READS_PER_S, Lanes, read_size
from ocigroup_cli.core.models import Message
from tests.helpers.cases import HYPOTHESIS_CASES


def _m(partition: int, offset: int, value: str = "dmFsdWU=") -> Message:
    return Message(partition, offset, "2026-11-28T10:00:00.000Z", None, value)


def test_pieces_go_out_one_partition_at_a_time_in_offset_order_oldest_read_first():
    lanes = Lanes()
    lanes.add([_m(1, 10), _m(1, 11), _m(1, 12)], "c1", 0.0)
    lanes.add([_m(0, 5), _m(1, 13)], "c2", 0.0)
    first = lanes.take(2)
    assert [(m.partition, m.offset) for m in first] == [(1, 10), (1, 11)]  # the lane read first, up to the limit
    second = lanes.take(2)
    assert [(m.partition, m.offset) for m in second] == [(0, 5)]  # partition 1 is in hand: the next free lane
    assert lanes.take(2) == ()  # both partitions in hand
    lanes.finish(first)
    assert [(m.partition, m.offset) for m in lanes.take(5)] == [(1, 12), (1, 13)]
    assert lanes.queued == 0


def test_a_read_is_committable_only_once_its_work_and_every_earlier_reads_work_is_settled():
    lanes = Lanes()
    lanes.add([_m(0, 1), _m(1, 1)], "c1", 0.0)
    lanes.add([_m(0, 2)], "c2", 0.0)
    p0, p1 = lanes.take(1), lanes.take(1)
    lanes.finish(p0)
    assert lanes.committable() is None  # c1 still carries partition 1's offset 1
    lanes.finish(p1)
    taken = lanes.committable()
    assert taken is not None and taken.cursor == "c1" and taken.through == {0: 1, 1: 1}
    lanes.finish(lanes.take(1))
    taken = lanes.committable()
    assert taken is not None and taken.cursor == "c2"
    assert lanes.committable() is None


def test_committable_reads_are_taken_together_with_the_highest_offset_of_each_partition():
    lanes = Lanes()
    lanes.add([_m(0, 1)], "c1", 0.0)
    lanes.add([_m(1, 7)], "c2", 0.0)
    lanes.finish(lanes.take(1))
    lanes.finish(lanes.take(1))
    taken = lanes.committable()
    assert taken is not None and taken.cursor == "c2" and taken.through == {0: 1, 1: 7}


def test_abandoned_work_holds_every_later_commit_back():
    lanes = Lanes()
    lanes.add([_m(0, 1), _m(0, 2)], "c1", 0.0)
    lanes.add([_m(1, 1)], "c2", 0.0)
    failed = lanes.take(1)
    lanes.abandon(failed)  # a failure that stops the instance: never done
    assert [(m.partition, m.offset) for m in lanes.take(5)] == [(1, 1)]  # nothing after it in partition 0
    lanes.finish((_m(1, 1),))  # partition 1 goes on
    assert lanes.committable() is None
    lanes.drop()  # read again from the commits: the abandoned message comes back
    assert lanes.add([_m(0, 1), _m(0, 2)], "c3", 0.0) == 2


def test_a_rejoin_reads_again_but_never_works_twice_and_waits_for_work_in_hand():
    lanes = Lanes()
    lanes.add([_m(0, 1), _m(0, 2), _m(1, 1)], "old", 0.0)
    done = lanes.take(1)
    lanes.finish(done)  # 0/1 done
    in_hand = lanes.take(1)  # 0/2 running
    assert lanes.drop() == 1  # 1/1 was waiting: read again
    fresh = lanes.add([_m(0, 1), _m(0, 2), _m(0, 3), _m(1, 1)], "new", 0.0)
    assert fresh == 2  # 0/3 and 1/1; 0/1 is done, 0/2 in hand
    assert lanes.committable() is None  # the new read carries 0/2, still in hand
    assert [(m.partition, m.offset) for m in lanes.take(5)] == [(1, 1)]  # partition 0 is in hand
    lanes.finish(in_hand)
    assert [(m.partition, m.offset) for m in lanes.take(5)] == [(0, 3)]


def test_a_reset_of_the_group_works_its_messages_again():
    lanes = Lanes()
    lanes.saw_committed({0: None})
    lanes.add([_m(0, 1), _m(0, 2)], "c1", 0.0)
    lanes.finish(lanes.take(2))
    assert not lanes.saw_committed({0: 2})  # the commit moved on: no reset
    assert lanes.saw_committed({0: 0})  # moved back (UpdateGroup)
    lanes.drop()
    assert lanes.add([_m(0, 1), _m(0, 2)], "c2", 0.0) == 2


def test_waiting_names_partitions_with_queued_or_uncommitted_reads():
    lanes = Lanes()
    lanes.add([_m(0, 1), _m(1, 1)], "c1", 0.0)
    assert lanes.waiting() == {0, 1}
    lanes.finish(lanes.take(1))
    lanes.finish(lanes.take(1))
    assert lanes.waiting() == {0, 1}  # committed only once the cursor is taken
    lanes.committable()
    assert lanes.waiting() == set()


def test_read_size_is_about_a_second_of_one_workers_work_within_the_read_budget():
    assert read_size(None, 4, 1, 10_000) == 1  # nothing measured: one piece (a stop replays little)
    assert read_size(None, 1, 500, 10_000) == 500
    assert read_size(0.3, 4, 1, 10_000) == round(4 / 0.3 / READS_PER_S)  # slow: the read budget decides
    assert read_size(0.3, 1, 1, 10_000) == 3  # a second of one worker's work
    assert read_size(0.001, 1, 1, 10_000) == 1000
    assert read_size(0.000001, 1, 500, 10_000) == 10_000  # fast: the cap
    assert read_size(5.0, 1, 1, 10_000) == 1  # slower than a second a message: one
    assert read_size(0.001, 1, 1, 200) == 200  # --batch-limit caps it


@given(st.floats(1e-7, 100), st.integers(1, 64), st.integers(1, 10_000), st.integers(1, 10_000))
def test_read_size_stays_within_a_piece_and_the_cap(pace, workers, piece, cap):
    n = read_size(pace, workers, piece, cap)
    assert 1 <= n <= cap
    assert n >= min(piece, cap)


class Pipeline(RuleBasedStateMachine):
    """Reads, work, rejoins and commits in any order against a model of what was processed."""

    def __init__(self):
        super().__init__()
        self.lanes = Lanes()
        self.next_offset = {0: 0, 1: 0, 2: 0}
        self.committed_ok = dict.fromkeys(self.next_offset, -1)  # what the service would have committed
        self.processed: set[tuple[int, int]] = set()
        self.in_hand: list[tuple[Message, ...]] = []
        self.reads = 0

    @rule(counts=st.lists(st.integers(0, 3), min_size=3, max_size=3))
    def read(self, counts):
        """A read returns the next messages from the committed offsets (after a rejoin) or from its position."""
        messages = []
        for p, n in enumerate(counts):
            for _ in range(n):
                messages.append(_m(p, self.next_offset[p]))
                self.next_offset[p] += 1
        self.reads += 1
        self.lanes.add(messages, f"c{self.reads}", 0.0)

    @rule(limit=st.sampled_from([1, 1, 2, 3]))
    def take(self, limit):
        work = self.lanes.take(limit)
        if work:
            offsets = [m.offset for m in work]
            assert offsets == sorted(offsets)
            assert all(m.partition == work[0].partition for m in work)
            self.in_hand.append(work)

    @precondition(lambda self: self.in_hand)
    @rule(index=st.integers(0, 10), ok=st.booleans())
    def settle(self, index, ok):
        work = self.in_hand.pop(index % len(self.in_hand))
        if ok:
            self.processed |= {(m.partition, m.offset) for m in work}
            self.lanes.finish(work)
        else:
            self.lanes.abandon(work)  # a failure, or a command ended: not done
        self.commit()  # the instance commits as soon as it may

    @rule()
    def commit(self):
        taken = self.lanes.committable()
        if taken is not None:
            for p, offset in taken.through.items():
                self.committed_ok[p] = max(self.committed_ok[p], offset)

    @rule()
    def rejoin(self):
        """Reads start again from the committed offsets."""
        self.lanes.drop()
        self.next_offset = {p: c + 1 for p, c in self.committed_ok.items()}

    @invariant()
    def committed_within_processed(self):
        for p, c in self.committed_ok.items():
            assert all((p, o) in self.processed for o in range(c + 1)), (p, c, sorted(self.processed))

    @invariant()
    def one_piece_per_partition(self):
        partitions = [w[0].partition for w in self.in_hand]
        assert len(partitions) == len(set(partitions))
        HYPOTHESIS_CASES["lanes: committed within processed"]["steps"] += 1


def test_what_is_offered_for_commit_was_always_processed():
    run_state_machine_as_test(Pipeline)


def test_reads_that_go_back_with_no_rejoin_are_a_reset_and_nothing_of_them_is_committed():
    """The service moves a live cursor with the group (UpdateGroup): a read gives offsets already worked before any
    look shows the reset. Not a rejoin's re-read, so not skipped: the lanes say the reads went back, forget what was
    done there, and no batch commits past the replay (the worker then joins again from the reset position)."""
    lanes = Lanes()
    lanes.add([_m(0, o) for o in range(5)], "c1", 0.0)
    lanes.finish(lanes.take(5))
    assert lanes.committable() is not None and not lanes.went_back
    lanes.add([_m(0, 1), _m(0, 2)], "c2", 1.0)  # back to 1 with no rejoin between
    assert lanes.went_back == {0} and lanes.done.through(0) == -1 and lanes.committable() is None
    lanes.drop()  # the rejoin: its re-read from the commit is expected, and skipped
    assert not lanes.went_back
    lanes.add([_m(0, o) for o in range(3)], "c3", 2.0)
    assert not lanes.went_back and [m.offset for m in lanes.take(5)] == [0, 1, 2]  # the replay is worked again


def test_a_rejoins_re_read_is_skipped_and_is_no_reset():
    lanes = Lanes()
    lanes.add([_m(1, o) for o in range(4)], "c1", 0.0)
    lanes.finish(lanes.take(4))
    lanes.drop()
    assert lanes.add([_m(1, o) for o in range(2, 6)], "c2", 1.0) == 2 and not lanes.went_back  # 4 and 5 are new
