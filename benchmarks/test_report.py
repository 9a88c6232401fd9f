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
        aggregate("graph/chain100", "median", real_time=987654321.0, speedup=fast,
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
    # (a marker no random value of this test prints: "777" was one, in 2457774.3 say)
    expect("| graph/chain" not in out and "98765432" not in out,
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


def report_of(runs, file_name):
    """report.py's output for one JSON file of `runs` (release build)."""
    with tempfile.TemporaryDirectory() as directory:
        with open(os.path.join(directory, file_name), "w") as f:
            json.dump({"context": {"library_build_type": "release"}, "benchmarks": runs}, f)
        return subprocess.run([sys.executable, os.path.join(here, "report.py"), directory],
                              capture_output=True, text=True, check=True).stdout


def expectation(failures):
    """expect(condition, what): notes `what` in `failures` when the condition does not hold."""
    def expect(condition, what):
        if not condition:
            failures.append(what)
    return expect


def check_kernels():
    """The kernel table (kernel_bench): one row per family and size, curt variant against the
    alternative, the ratio from the gb_per_s medians, the fraction of copy, and the goals' verdicts
    (higher-is-better bandwidth goals, and the time goal at 2^16). Random values each run."""
    rng = random.Random()
    copy = rng.uniform(3000.0, 4000.0)
    runs = []

    def kernel(name, gb, mean_gb=None):
        runs.append(aggregate(name, "mean", gb_per_s=mean_gb or gb * 7, of_copy=9.99))
        runs.append(aggregate(name, "median", gb_per_s=gb, of_copy=gb / copy, copy_gb_per_s=copy))

    thrust = rng.uniform(2000.0, 3000.0)
    vec_met = rng.uniform(0.975, 1.1)
    kernel("kernel/vec_add/thrust/268435456", thrust)
    kernel("kernel/vec_add/float4/268435456", thrust * vec_met)
    kernel("kernel/vec_add/kernel/268435456", thrust * 0.5)
    cub_big, cub_small = rng.uniform(2000.0, 3000.0), rng.uniform(20.0, 100.0)
    sum_missed = rng.uniform(0.5, 0.96)     # under 0.97x CUB at 2^28
    small_time_met = rng.uniform(1.0, 1.19)  # time within 1.2x CUB's at 2^16
    small_time_missed = rng.uniform(1.25, 2.0)
    kernel("kernel/reduce_sum_float/cub/268435456", cub_big)
    kernel("kernel/reduce_sum_float/two_pass/268435456", cub_big * sum_missed * 0.9)
    kernel("kernel/reduce_sum_float/last_block/268435456", cub_big * sum_missed)  # the fastest
    kernel("kernel/reduce_sum_float/cub/65536", cub_small)
    kernel("kernel/reduce_sum_float/two_pass/65536", cub_small / small_time_met)
    kernel("kernel/reduce_max_float/cub/65536", cub_small)
    kernel("kernel/reduce_max_float/grid_sync/65536", cub_small / small_time_missed)
    kernel("kernel/reduce_max_float/cub/1048576", cub_small * 10)  # no goal at 2^20
    kernel("kernel/reduce_max_float/two_pass/1048576", cub_small * 9)
    hist_cub = rng.uniform(1000.0, 2000.0)
    uniform_met, skewed_missed = rng.uniform(1.71, 3.0), rng.uniform(0.5, 1.14)
    kernel("kernel/histogram/cub/uniform/1073741824", hist_cub)
    kernel("kernel/histogram/auto/uniform/1073741824", hist_cub * uniform_met)
    kernel("kernel/histogram/cub/skewed/1073741824", hist_cub)
    kernel("kernel/histogram/auto/skewed/1073741824", hist_cub * skewed_missed)
    kernel("kernel/histogram/per_lane/skewed/1073741824", hist_cub * 5)  # not the goal's variant
    copy_kernel, transpose_met = rng.uniform(2000.0, 3000.0), rng.uniform(0.91, 1.0)
    kernel("kernel/transpose/copy_kernel/8192x8192", copy_kernel)
    kernel("kernel/transpose/tiled64/8192x8192", copy_kernel * transpose_met)
    kernel("kernel/transpose/naive/8192x8192", copy_kernel * 0.3)
    kernel("kernel/orphan/float4/4096", 10.0)  # a family without an alternative: no row

    out = report_of(runs, "kernel_bench.json")
    lines = out.splitlines()
    failures = []
    expect = expectation(failures)

    def row(family, size):
        return next((l for l in lines if l.startswith(f"| {family} | {size} |")), "")

    vec = row("vec_add", "268435456")
    expect(f"| float4 | {thrust * vec_met:.1f} | thrust | {thrust:.1f} | {vec_met:.3f} |" in vec,
           f"vec_add row: float4 against thrust, medians and ratio: {vec!r}")
    expect(f"| {thrust * vec_met / copy:.2f} | {thrust / copy:.2f} |" in vec,
           f"vec_add row: fractions of copy: {vec!r}")
    expect("| >= 0.97x | met:" in vec, f"vec_add goal met: {vec!r}")
    big = row("reduce_sum_float", "268435456")
    expect(f"| last_block | {cub_big * sum_missed:.1f} | cub |" in big and f"{sum_missed:.3f}" in big,
           f"the fastest reduction variant against CUB: {big!r}")
    expect("| >= 0.97x | **missed**" in big, f"reduction at 2^28 under its goal: {big!r}")
    small = row("reduce_sum_float", "65536")
    expect(f"time <= 1.2x ({small_time_met:.2f}x)" in small and "| met:" in small,
           f"reduction time at 2^16 within 1.2x: {small!r}")
    small_max = row("reduce_max_float", "65536")
    expect(f"time <= 1.2x ({small_time_missed:.2f}x)" in small_max and "**missed**" in small_max,
           f"reduction time at 2^16 over 1.2x: {small_max!r}")
    mid = row("reduce_max_float", "1048576")
    expect(mid.endswith("|  |  |") and "| 0.900 |" in mid, f"no goal at 2^20: {mid!r}")
    uniform = row("histogram/uniform", "1073741824")
    expect(f"| auto | {hist_cub * uniform_met:.1f} | cub |" in uniform and "| >= 1.7x | met:" in uniform,
           f"histogram uniform: {uniform!r}")
    skewed = row("histogram/skewed", "1073741824")
    expect("| auto |" in skewed and f"{skewed_missed:.3f}" in skewed
           and "| >= 1.15x | **missed**" in skewed, f"histogram skewed: {skewed!r}")
    transpose = row("transpose", "8192x8192")
    expect(f"| tiled64 | {copy_kernel * transpose_met:.1f} | copy_kernel |" in transpose
           and "| >= 0.9x | met:" in transpose, f"transpose: {transpose!r}")
    expect("9.99" not in out, "the means must not be reported")
    expect(not row("orphan", "4096") and "| kernel/" not in out,
           "no row without an alternative; kernel runs stay out of the side-by-side table")
    order = [l.split(" | ")[0:2] for l in lines if l.startswith("| reduce_sum_float |")]
    expect(order == [["| reduce_sum_float", "65536"], ["| reduce_sum_float", "268435456"]],
           f"sizes in numeric order: {order}")
    missed_line = next((l for l in lines if l.startswith("Goals missed:")), "")
    for name in ("kernel/reduce_sum_float/last_block/268435456",
                 "kernel/reduce_max_float/grid_sync/65536", "kernel/histogram/auto/skewed/1073741824"):
        expect(name in missed_line, f"{name} listed as missed: {missed_line!r}")
    for name in ("vec_add", "histogram/uniform", "transpose", "reduce_sum_float/two_pass/65536"):
        expect(name not in missed_line, f"{name} not listed as missed: {missed_line!r}")
    if failures:
        print(out)
        print("\n".join("FAILED: " + f for f in failures))
        return 1
    print("report.py: kernel table checks passed")
    return 0


def check_multi_gpu():
    """The multi-GPU table (multi_gpu_bench): peer copies (curt and raw GB/s, the ratio, the 0.9x
    goal met or missed; no goal without peer access) and the NCCL all-reduce's bus bandwidth (the
    0.98x goal), from the medians of manual-time runs; the missed ones listed last. Random values
    each run."""
    rng = random.Random()
    runs = []

    def manual(name, **counters):
        for kind, scale in (("mean", 7.0), ("median", 1.0)):
            fields = {k: v * scale for k, v in counters.items()}
            runs.append(dict(name=f"{name}/manual_time_{kind}", run_name=f"{name}/manual_time",
                             run_type="aggregate", aggregate_name=kind, real_time=123.0 * scale,
                             time_unit="us", **fields))

    def copy(name, raw, ratio):
        manual(name, raw_GBps=raw, curt_GBps=raw * ratio, curt_over_raw=ratio,
               raw_us=1e3, curt_us=1e3 / ratio)

    raw_one = rng.uniform(300.0, 400.0)
    met = rng.uniform(0.905, 1.1)      # over the 0.9x goal
    missed = rng.uniform(0.5, 0.895)   # under it
    staged, staged_ratio = rng.uniform(10.0, 50.0), rng.uniform(0.3, 0.8)
    copy("multi_gpu/peer_copy/0to1/1GiB", raw_one, met)
    copy("multi_gpu/peer_copy/0to1/64MiB", raw_one * 0.9, met)
    copy("multi_gpu/peer_copy/bidirectional/64MiB", raw_one * 2, missed)
    copy("multi_gpu/peer_copy_no_access/1to0/1GiB", staged, staged_ratio)
    bus = rng.uniform(200.0, 400.0)
    nccl_met, nccl_missed = rng.uniform(0.981, 1.05), rng.uniform(0.8, 0.975)
    for size, ratio in (("1GiB", nccl_met), ("1MiB", nccl_missed)):
        manual(f"multi_gpu/nccl_all_reduce/{size}", ranks=2.0, raw_busbw_GBps=bus,
               curt_busbw_GBps=bus * ratio, raw_algbw_GBps=bus, curt_algbw_GBps=bus * ratio,
               curt_over_raw=ratio)
    out = report_of(runs, "multi_gpu_bench.json")
    lines = out.splitlines()
    failures = []
    expect = expectation(failures)

    def row(what, size):
        return next((l for l in lines if l.startswith(f"| {what} | {size} |")), "")

    one = row("peer copy 0to1", "1GiB")
    expect(f"| {raw_one:.1f} | {raw_one * met:.1f} | {met:.3f} | >= 0.9x | met:" in one,
           f"peer copy over its goal, medians: {one!r}")
    both = row("peer copy bidirectional", "64MiB")
    expect(f"| {raw_one * 2:.1f} | {raw_one * 2 * missed:.1f} | {missed:.3f} | >= 0.9x | **missed**"
           in both, f"peer copy under its goal: {both!r}")
    none = row("peer copy 1to0, no peer access", "1GiB")
    expect(f"| {staged:.1f} | {staged * staged_ratio:.1f} | {staged_ratio:.3f} |  |  |" in none,
           f"no goal without peer access: {none!r}")
    big = row("NCCL all-reduce, bus bandwidth, 2 GPUs", "1GiB")
    expect(f"| {bus:.1f} | {bus * nccl_met:.1f} | {nccl_met:.3f} | >= 0.98x | met:" in big,
           f"all-reduce over its goal: {big!r}")
    small = row("NCCL all-reduce, bus bandwidth, 2 GPUs", "1MiB")
    expect(f"| {nccl_missed:.3f} | >= 0.98x | **missed**" in small,
           f"all-reduce under its goal: {small!r}")
    order = [l.split(" | ")[0:2] for l in lines if l.startswith("| peer copy 0to1 |")]
    expect(order == [["| peer copy 0to1", "64MiB"], ["| peer copy 0to1", "1GiB"]],
           f"sizes in numeric order: {order}")
    expect("| multi_gpu/" not in out, "the multi-GPU runs stay out of the side-by-side table")
    expect(f"{raw_one * 7:.1f}" not in out, "the means must not be reported")
    missed_line = next((l for l in lines if l.startswith("Goals missed:")), "")
    for name in ("multi_gpu/peer_copy/bidirectional/64MiB", "multi_gpu/nccl_all_reduce/1MiB"):
        expect(name in missed_line, f"{name} listed as missed: {missed_line!r}")
    for name in ("peer_copy/0to1", "no_access", "nccl_all_reduce/1GiB"):
        expect(name not in missed_line, f"{name} not listed as missed: {missed_line!r}")
    if failures:
        print(out)
        print("\n".join("FAILED: " + f for f in failures))
        return 1
    print("report.py: multi-GPU table checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main() or check_kernels() or check_multi_gpu())
