#!/usr/bin/env python3
"""Host test of report.py: a paired run over its goal is reported missed, one under it met; the
medians (not the means) are what is read; a non-release Google Benchmark is called out; the
batch table and the side-by-side ratio come from the right fields. Random values each run."""
import json
import os
import random
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))


def aggregate(name, kind, **fields):
    return dict(name=f"{name}/real_time_{kind}", run_name=f"{name}/real_time", run_type="aggregate",
                aggregate_name=kind, real_time=fields.pop("real_time", 1.0), time_unit="us", **fields)


def main():
    rng = random.Random()
    raw = rng.uniform(100, 5000)
    over = 1.03 + rng.uniform(0.005, 0.2)     # over the 3 % launch goal
    under = 1.0 + rng.uniform(0.0, 0.019)     # under the 2 % copy goal
    benchmarks = [
        aggregate("paired/launch/empty", "mean", raw_ns=1.0, curt_ns=9.0, curt_over_raw=9.0),
        aggregate("paired/launch/empty", "median", raw_ns=raw, curt_ns=raw * over, curt_over_raw=over),
        aggregate("paired/copy/h2d/4KiB", "median", raw_ns=raw, curt_ns=raw * under, curt_over_raw=under),
        aggregate("gpu_time/x/raw", "median", real_time=2.0),
        aggregate("gpu_time/x/curt", "median", real_time=3.0),
    ]
    with tempfile.TemporaryDirectory() as directory:
        with open(os.path.join(directory, "a_bench.json"), "w") as f:
            json.dump({"context": {"library_build_type": "debug", "curt_device": "Test GPU"},
                       "benchmarks": benchmarks}, f)
        out = subprocess.run([sys.executable, os.path.join(here, "report.py"), directory],
                             capture_output=True, text=True, check=True).stdout
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    launch = next((l for l in out.splitlines() if l.startswith("| launch/empty |")), "")
    copy = next((l for l in out.splitlines() if l.startswith("| copy/h2d/4KiB |")), "")
    expect(f"{over:.3f}" in launch and "**missed**" in launch, f"launch row over its goal: {launch!r}")
    expect(f"{raw:.1f}" in launch, f"launch row shows the median raw ns: {launch!r}")
    expect("9.000" not in launch, "the mean must not be reported")
    expect(f"{under:.3f}" in copy and "| met:" in copy, f"copy row under its goal: {copy!r}")
    expect("**debug**" in out, "a debug Google Benchmark is called out")
    expect("Test GPU" in out, "the device is named")
    expect("| gpu_time/x |" in out and "| 1.500 |" in out, "curt / raw of the separate runs")
    expect("Goals missed: paired/launch/empty" in out, "the missed goals are listed last")
    if failures:
        print(out)
        print("\n".join("FAILED: " + f for f in failures))
        return 1
    print("report.py: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
