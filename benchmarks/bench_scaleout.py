"""The Ray engine's overhead on one machine: the local engine against Ray Data with 1 and 2 actors.

    .venv/bin/python benchmarks/bench_scaleout.py [--images 512] [--repeats 2] [--model efficientnet_lite0]

The same image files (the packaged photographs, repeated: JPEG and PNG of several sizes, as
``bench_inference.make_folder`` writes them) go through ``classify.targets.predict_folder`` with
the local engine (its defaults: DataLoader decode workers, forward threads, ONNX Runtime on the
CPU) and with ``engine='ray'`` on a local Ray instance started once before the rounds (its start is
reported apart: a cluster is started once, not per run). Every call includes loading the model,
and for Ray starting the actors: what an analyst waits for. Rounds are interleaved so the load of
other processes hits every side alike; each figure has the load average and the share of the CPU
other processes used (``bench_inference.measure``). The steady rate counts from the first stored
batch to the last (progress events), which leaves model load and actor start out. The ratio to
the local engine of the same round is the overhead (below 1 on one machine: Ray adds actor start,
a scheduler, and the rows' trip through the object store, and gains nothing without more machines). The top-5 of every image is
compared with the local engine's.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_inference import make_folder, measure  # noqa: E402

from classify.engine.types import InferenceOptions  # noqa: E402
from classify.engine.ray_engine import ray_available, ray_session, ray_version  # noqa: E402
from classify.models.registry import DEFAULT_MODEL  # noqa: E402
from classify.targets import predict_folder  # noqa: E402



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()
    if not ray_available():
        print("ray is not installed (pip install -e '.[ray]'): nothing measured")
        return 0
    import ray
    import torch

    print(f"{args.images} images, {args.model}, {os.cpu_count()} CPU cores, torch {torch.__version__}, "
          f"ray {ray_version()}, {args.repeats} rounds")
    sides = {"local engine": InferenceOptions(),
             "ray, 1 actor": InferenceOptions(engine="ray", ray_actors=1),
             "ray, 2 actors": InferenceOptions(engine="ray", ray_actors=2)}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "images"
        make_folder(folder, args.images)
        os.environ.setdefault("WILDLENS_HOME", str(Path(tmp) / "home"))  # the ONNX export cache, not ~/.wildlens
        started = time.perf_counter()
        with ray_session(None) as where:
            print(f"{where}: started in {time.perf_counter() - started:.1f} s ({ray.cluster_resources().get('CPU', 0):g} "
                  "CPUs), once, before the rounds")
        tables, samples, steady = {}, {name: [] for name in sides}, {name: [] for name in sides}
        # Round 0 exports the model to ONNX once (cached; the actors read the same cache); not counted.
        predict_folder(folder, args.model, options=InferenceOptions())
        for round_number in range(args.repeats):
            for name, options in sides.items():
                seen: list[tuple[float, int]] = []

                def run(options=options, name=name, seen=seen):
                    def progress(event):
                        if event.stage == "inference" and event.done:
                            seen.append((time.perf_counter(), event.done))
                    tables[name], _ = predict_folder(folder, args.model, options=options, progress=progress)
                sample = measure(args.images, run)
                samples[name].append(sample)
                (t0, n0), (t1, n1) = seen[0], seen[-1]
                steady[name].append((n1 - n0) / max(1e-9, t1 - t0))
                print(f"round {round_number + 1}  {name:14s} {sample.describe()}; first rows stored after "
                      f"{t0 - (t1 - args.images / sample.rate):.1f} s")
        local = statistics.median(s.rate for s in samples["local engine"])
        local_steady = statistics.median(steady["local engine"])
        print(f"\nmedian images/s: the whole call of {args.images} (model load and actor start included), and the "
              "steady rate from the first stored batch to the last, each with its ratio to the local engine:")
        for name in sides:
            rate, flow = statistics.median(s.rate for s in samples[name]), statistics.median(steady[name])
            print(f"  {name:14s} whole {rate:6.1f} images/s {rate / local:5.2f}x   steady {flow:6.1f} images/s "
                  f"{flow / local_steady:5.2f}x")
        reference = _top5(tables["local engine"])
        for name in ("ray, 1 actor", "ray, 2 actors"):
            same = (_top5(tables[name]) == reference).all(axis=1).mean()
            print(f"  top-5 equal to the local engine's ({name}): {100 * same:.1f} % of images")
        print("('others used' counts Ray's worker processes as others: they are not this process's children.)")
    ray.shutdown()
    return 0


def _top5(table):
    columns = [c for c in table.columns if c.startswith("pred_wnid")]
    return table.sort_values(["model", "image"]).reset_index(drop=True)[columns]


if __name__ == "__main__":
    sys.exit(main())
