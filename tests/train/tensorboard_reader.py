"""Reads a TensorBoard log folder with the `tensorboard` package's own event
reader (EventAccumulator, which TensorBoard's Python loader uses, restart
purging included) and prints every scalar as JSON:

    {"files": N, "scalars": {"train/loss": [[step, value], ...], ...}}

Used by tests/train/tensorboard_test.cpp as the outside reference.
"""
import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator


def main():
    logdir = sys.argv[1]
    acc = event_accumulator.EventAccumulator(
        logdir, size_guidance={event_accumulator.SCALARS: 0}
    )
    acc.Reload()
    scalars = {
        tag: [[e.step, e.value] for e in acc.Scalars(tag)]
        for tag in acc.Tags()["scalars"]
    }
    files = [f for f in os.listdir(logdir) if "tfevents" in f]
    print(json.dumps({"files": len(files), "scalars": scalars}))


if __name__ == "__main__":
    main()
