#!/usr/bin/python3
"""torchrun of Debian 12's python3-torch (PyTorch 1.13), made to start on Python 3.11.

The tests that compare cohort with the real torchrun use this. Debian's torchrun stops at start
on Python 3.11: its Std.from_str reads the default `--redirects 0` as None, because iterating an
IntFlag changed in 3.11. Only that parser is replaced here; torchrun itself runs unchanged.
"""
import sys

from torch.distributed.elastic.multiprocessing import api


def parse_std(cls, text):
    """'0'..'3' for every rank, or 'rank:value,rank:value' per rank."""
    if ":" not in text:
        return cls(int(text))
    per_rank = (entry.split(":", 1) for entry in text.split(","))
    return {int(rank): cls(int(value)) for rank, value in per_rank}


api.Std.from_str = classmethod(parse_std)

from torch.distributed.run import main  # noqa: E402  (after the parser is replaced)

sys.exit(main())
