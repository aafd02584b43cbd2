"""TRAINKIT_RANK_PREFIX: each line a rank prints is written whole, its rank first."""

from __future__ import annotations

import io

from trainkit.cli.rank_prefix import PrefixedLines


def test_a_print_is_one_write_of_the_whole_prefixed_line():
    """print() writes its text and the newline in two calls: the stream below gets whole lines
    only, so two ranks sharing an output never run their lines together."""
    writes: list[str] = []

    class Recorder(io.StringIO):
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

    stream = PrefixedLines(Recorder(), "[rank 1] ")
    print("hello from rank 1", file=stream)
    print("two\nlines", file=stream)
    assert writes == ["[rank 1] hello from rank 1\n", "[rank 1] two\n", "[rank 1] lines\n"]


def test_a_flushed_part_of_a_line_is_written_once_and_its_end_not_prefixed_again():
    out = io.StringIO()
    stream = PrefixedLines(out, "[rank 0] ")
    stream.write("epoch 1: ")
    stream.flush()
    stream.write("loss 0.5\n")
    stream.write("next")
    stream.flush()
    assert out.getvalue() == "[rank 0] epoch 1: loss 0.5\n[rank 0] next"
