#!/usr/bin/env python3
"""Host test of report.py: a paired run over its goal is reported missed, one under it met; the
medians (not the means) are what is read; a non-release Google Benchmark is called out; the
batch table and the side-by-side ratio come from the right fields; the graph goals: launch and
build in the paired table, the speed-up (higher is better) in its own table. Random values each
run."""
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
    graph_launch = 1.0 + rng.uniform(0.0, 0.019)  # under the 2 % graph launch goal
    build = 1.05 + rng.uniform(0.005, 0.2)        # over the 5 % build goal
    fast = 4.0 + rng.uniform(0.01, 2.0)           # a speed-up over the 4x goal
    slow = rng.uniform(1.0, 3.99)                 # one under it
    graph_us = rng.uniform(20.0, 200.0)
    benchmarks = [
        aggregate("paired/launch/empty", "mean", raw_ns=1.0, curt_ns=9.0, curt_over_raw=9.0),
        aggregate("paired/launch/empty", "median", raw_ns=raw, curt_ns=raw * over, curt_over_raw=over),
        aggregate("paired/copy/h2d/4KiB", "median", raw_ns=raw, curt_ns=raw * under, curt_over_raw=under),
        aggregate("paired/graph/launch", "median", raw_ns=raw, curt_ns=raw * graph_launch,
                  curt_over_raw=graph_launch),
        aggregate("paired/graph/build_instantiate/1000", "median", raw_ns=raw * 1000,
                  curt_ns=raw * 1000 * build, curt_over_raw=build),
        aggregate("graph/chain100", "mean", speedup=99.0),
        aggregate("graph/chain100", "median", real_time=777.0, speedup=fast,
                  speedup_raw=fast * 0.9, graph_curt_over_raw=1.0, graph_curt_us=graph_us,
                  graph_raw_us=graph_us, stream_curt_us=graph_us * fast,
                  stream_chevron_us=graph_us * fast * 0.9),
        aggregate("graph/chain_slow", "median", speedup=slow, graph_curt_us=graph_us),
        aggregate("gpu_time/x/raw", "median", real_time=2.0),
        aggregate("gpu_time/x/curt", "median", real_time=3.0),
    ]
    with tempfile.TemporaryDirectory() as directory:
        with open(os.path.join(directory, "a_bench.json"), "w") as f:
            json.dump({"context": {"library_build_type": "debug", "curt_device": "Test GPU"},
                       "benchmarks": benchmarks}, f)
        chart = os.path.join(directory, "overhead.svg")
        out = subprocess.run([sys.executable, os.path.join(here, "report.py"), "--svg", chart,
                              directory], capture_output=True, text=True, check=True).stdout
        with open(chart) as f:
            svg = f.read()
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
    expect("](overhead.svg)" in out, "the report links the chart")
    paired_count = 4  # the paired medians above
    bars = svg.count('class="bar"')
    expect(bars == paired_count, f"one bar per paired operation: {bars}")
    expect(svg.count('class="goal"') == paired_count, "a goal tick per operation that has one")
    expect(f">{over:.3f}<" in svg and "#c0392b" in svg, "the launch over its goal is drawn as over")
    lines = out.splitlines()
    graph_launch_row = next((l for l in lines if l.startswith("| graph/launch |")), "")
    build_row = next((l for l in lines if l.startswith("| graph/build_instantiate/1000 |")), "")
    chain = next((l for l in lines if l.startswith("| chain100 |")), "")
    chain_slow = next((l for l in lines if l.startswith("| chain_slow |")), "")
    expect(f"{graph_launch:.3f}" in graph_launch_row and "| 1.02 |" in graph_launch_row
           and "| met:" in graph_launch_row, f"graph launch row under its goal: {graph_launch_row!r}")
    expect(f"{build:.3f}" in build_row and "| 1.05 |" in build_row and "**missed**" in build_row,
           f"graph build row over its goal: {build_row!r}")
    expect(f"| {fast:.2f}x |" in chain and "| met:" in chain and ">= 4x" in chain,
           f"speed-up over its goal is met: {chain!r}")
    expect(f"| {fast * 0.9:.2f}x |" in chain, f"the raw speed-up is shown: {chain!r}")
    expect(f"{graph_us:.1f}" in chain and f"{graph_us * fast:.1f}" in chain,
           f"the GPU times come from the counters: {chain!r}")
    expect("99.00" not in chain, "the mean speed-up must not be reported")
    expect(f"| {slow:.2f}x |" in chain_slow and "**missed**" in chain_slow,
           f"speed-up under its goal is missed: {chain_slow!r}")
    expect("| graph/chain" not in out and "777" not in out,
           "the speed-up runs stay out of the side-by-side table")
    missed_line = next((l for l in lines if l.startswith("Goals missed:")), "")
    expect("paired/launch/empty" in missed_line, "the missed goals are listed last")
    expect("paired/graph/build_instantiate/1000" in missed_line and "graph/chain_slow" in missed_line,
           f"the missed graph goals are listed: {missed_line!r}")
    expect("paired/graph/launch" not in missed_line and "graph/chain100" not in missed_line,
           f"the met graph goals are not listed as missed: {missed_line!r}")
    if failures:
        print(out)
        print("\n".join("FAILED: " + f for f in failures))
        return 1
    print("report.py: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
