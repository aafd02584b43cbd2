"""The rank board: ranks mark phases, the launcher reads them and names who was late."""

from __future__ import annotations

from trainkit.distributed import rank_board
from trainkit.distributed.rank_board import (
    RankBoard,
    RankPosition,
    create_board,
    explain,
    late_ranks,
    read_board,
)


def test_each_rank_writes_its_own_slot_and_the_launcher_reads_all(tmp_path, monkeypatch):
    path = create_board(str(tmp_path), 2)
    monkeypatch.setenv(rank_board.BOARD_ENV, path)
    for local_rank, phase in ((0, rank_board.BACKWARD), (1, rank_board.TRAINING_STEP)):
        monkeypatch.setenv("LOCAL_RANK", str(local_rank))
        board = RankBoard()
        board.mark(phase, epoch=3, batch=7)
        board.mark(phase)  # keeps epoch and batch
    positions = read_board(path, first_rank=4)
    assert [(p.rank, p.doing, p.epoch, p.batch) for p in positions] == [
        (4, "backward (gradient all-reduce)", 3, 7),
        (5, "training_step", 3, 7),
    ]
    assert all(0 <= p.seconds < 5 for p in positions)


def test_without_a_launcher_marking_does_nothing(monkeypatch):
    monkeypatch.delenv(rank_board.BOARD_ENV, raising=False)
    RankBoard().mark(rank_board.BACKWARD, 0, 0)  # no board: no error, no file


def at(rank, phase, epoch=0, batch=2):
    return RankPosition(rank, phase, epoch, batch, seconds=4.0)


def test_a_rank_not_waiting_on_its_peers_is_late():
    late, waiting = late_ranks([at(0, rank_board.BACKWARD), at(1, rank_board.TRAINING_STEP)])
    assert [p.rank for p in late] == [1] and [p.rank for p in waiting] == [0]


def test_a_rank_still_loading_its_batch_is_late_for_one_already_stepping():
    late, _ = late_ranks([at(0, rank_board.TRAINING_STEP), at(1, rank_board.DATA)])
    assert [p.rank for p in late] == [1]


def test_a_rank_behind_the_others_is_late_even_inside_a_collective():
    late, _ = late_ranks([at(0, rank_board.BACKWARD, batch=5), at(1, rank_board.BACKWARD, batch=4)])
    assert [p.rank for p in late] == [1]


def test_explanations_name_late_and_waiting_ranks_or_every_rank():
    hung = [at(0, rank_board.BACKWARD), at(1, rank_board.DATA)]
    assert explain(hung, timed_out=True) == (
        "a collective timed out: late: rank 1 in loading the next batch (epoch 0, batch 2, for "
        "4.0 s); waiting: rank 0 in backward (gradient all-reduce) (epoch 0, batch 2, for 4.0 s)"
    )
    everyone = [at(0, rank_board.BACKWARD), at(1, rank_board.BACKWARD)]
    assert "every rank waiting" in explain(everyone, timed_out=True)
    assert explain(everyone, timed_out=False).startswith(
        "where each rank was: ranks 0-1 in backward"
    )


def test_ranks_at_the_same_point_are_listed_together():
    node = [at(rank, rank_board.BACKWARD) for rank in (8, 9, 10, 12, 14, 15)]
    node += [at(11, rank_board.TRAINING_STEP), at(13, rank_board.DATA)]
    assert explain(node, timed_out=True, other_nodes=True) == (
        "a collective timed out: late: rank 11 in training_step (epoch 0, batch 2, for 4.0 s); "
        "rank 13 in loading the next batch (epoch 0, batch 2, for 4.0 s); waiting: ranks 8-10, "
        "12, 14-15 in backward (gradient all-reduce) (epoch 0, batch 2, for 4.0 s)"
    )


def test_on_several_nodes_a_node_whose_ranks_all_wait_points_to_another_node():
    everyone = [at(4, rank_board.BACKWARD), at(5, rank_board.BACKWARD)]
    text = explain(everyone, timed_out=True, other_nodes=True)
    assert text.startswith("a collective timed out with every rank of this node waiting (ranks 4-5")
    assert text.endswith("the late rank is on another node (its node's launcher names it)")
    hung = [at(4, rank_board.BACKWARD), at(5, rank_board.DATA)]
    assert "late: rank 5 in loading the next batch" in explain(hung, True, other_nodes=True)
    alone = [at(3, rank_board.TRAINING_STEP)]  # its peers wait on other nodes
    assert explain(alone, True, other_nodes=True).endswith(
        "late: rank 3 in training_step (epoch 0, batch 2, for 4.0 s); waiting: none"
    )


def test_on_several_nodes_a_rank_behind_inside_a_collective_waits_for_another_node():
    # node 1 cut off mid all-reduce: rank 0 got its result and went on to the next batch (DDP's
    # bucket broadcast in forward), rank 1 still waits for node 1's part of the same all-reduce
    cut = [at(0, rank_board.TRAINING_STEP, batch=3), at(1, rank_board.BACKWARD, batch=2)]
    assert late_ranks(cut, other_nodes=True) == ([], cut)
    assert explain(cut, True, other_nodes=True).endswith(
        "the late rank is on another node (its node's launcher names it)"
    )
    assert late_ranks(cut)[0] == [cut[1]]  # one node: nobody else to wait for, so it is late


def test_a_rank_that_raised_a_collective_timeout_waited_whatever_its_phase():
    # DDP broadcasts buffers inside training_step: the rank that timed out there was waiting
    step = RankPosition(1, rank_board.TRAINING_STEP, 0, 1, seconds=6.0, in_collective=True)
    assert step.waits_on_peers and step.doing == "training_step, inside a collective"
    cut = [at(0, rank_board.BACKWARD, batch=1), step]
    assert late_ranks(cut, other_nodes=True) == ([], cut)
    assert late_ranks(cut)[0] == [step]  # one node: nobody else to wait for, so it is late
