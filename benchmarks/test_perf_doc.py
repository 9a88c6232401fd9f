#!/usr/bin/env python3
"""Host test of perf_doc.py on synthetic stored runs: a complete older run and a newer one whose
JSON a timeout cut short; the newer run's rows win, the older run's remain where the newer did not
measure; the cut run's entries written in full are recovered and its tables marked partial; a
goal without a measurement is "not measured" and every goal of report.py is listed; the reading
is copied verbatim; --store copies a bench.sh output (empty JSON left out) under a date-card id;
the same input gives the same bytes. Random values each run."""
import json
import os
import random
import re
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.dont_write_bytecode = True
import report  # noqa: E402

failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


def median(name, suffix="real_time", **fields):
    return dict(name=f"{name}/{suffix}_median", run_name=f"{name}/{suffix}", run_type="aggregate",
                aggregate_name="median", real_time=fields.pop("real_time", 1.0), time_unit="us",
                **fields)


def paired(name, ratio, raw=1000.0):
    return median(name, raw_ns=raw, curt_ns=raw * ratio, curt_over_raw=ratio)


def kernel(name, gb, copy):
    # Google Benchmark puts MinTime and UseManualTime into the name, as kernel_bench's do.
    return median(f"{name}/min_time:0.100", "manual_time", gb_per_s=gb, copy_gb_per_s=copy,
                  of_copy=gb / copy)


def write_json(path, date, benchmarks, cut=False):
    text = json.dumps({"context": {"date": date, "curt_device": "NVIDIA H200",
                                   "curt_cuda_driver": "13.0", "curt_cuda_runtime": "13.0",
                                   "library_build_type": "release"},
                       "benchmarks": benchmarks}, indent=2)
    if cut:  # stopped in the middle of the last entry, as a killed program leaves it
        text = text[:text.rindex('"run_name"')]
    with open(path, "w") as f:
        f.write(text)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def block(doc, title, run_id):
    """The part of table section `title` that comes from run `run_id`."""
    section = doc.split(f"### {title}\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    for part in re.split(r"\n(?=From run `)", section):
        if part.startswith(f"From run `{run_id}`"):
            return part
    return ""


def row(text, first):
    return next((line for line in text.splitlines() if line.startswith(f"| {first} |")), "")


def perf_doc(*args):
    return subprocess.run([sys.executable, os.path.join(here, "perf_doc.py"), *args],
                          capture_output=True, text=True, check=True).stdout


def main():
    rng = random.Random()
    old_launch = 1.0 + rng.uniform(0.0, 0.02)
    new_launch = 1.0 + rng.uniform(0.0, 0.02)
    copy_missed = 1.02 + rng.uniform(0.005, 0.1)  # over the 2 % typed-copy goal
    thrust, copy_bw = rng.uniform(3000.0, 4000.0), rng.uniform(4000.0, 4500.0)
    vec_ratio = rng.uniform(0.975, 1.1)            # float4 over 0.97x Thrust: met
    reading = f"Reading kept by hand, {rng.random():.6f}.\n\n- at parity: *launches*\n"

    with tempfile.TemporaryDirectory() as tmp:
        results, doc = os.path.join(tmp, "results"), os.path.join(tmp, "docs", "performance.md")
        os.makedirs(os.path.join(tmp, "docs"))
        older, newer = os.path.join(results, "old-run"), os.path.join(results, "new-run")
        os.makedirs(older)
        os.makedirs(newer)
        write_json(os.path.join(older, "launch_bench.json"), "2026-11-29T10:00:00+00:00", [
            paired("paired/launch/empty", old_launch),
            paired("paired/copy/h2d/4KiB", copy_missed),
        ])
        write_json(os.path.join(older, "kernel_bench.json"), "2026-11-29T10:05:00+00:00", [
            kernel("kernel/vec_add/thrust/268435456", thrust, copy_bw),
            kernel("kernel/vec_add/float4/268435456", thrust * vec_ratio, copy_bw),
        ])
        write(os.path.join(older, "machine.txt"),
              "name, driver_version, memory.total [MiB]\nNVIDIA H200, 580.1.2, 143771 MiB\n")
        write(os.path.join(older, "command.txt"),
              "# made by hand for the test\nscripts/bench.sh -o OUT -r 5\n")
        write(os.path.join(older, "compile_cost.log"),
              "noise\n| compiler | ratio |\n|---|---|\n| g++ | 1.25 |\n")
        write_json(os.path.join(newer, "launch_bench.json"), "2026-11-30T12:00:00+00:00", [
            paired("paired/launch/empty", new_launch),
            paired("paired/event_record/no_timing", 1.5),  # cut: must not be read
        ], cut=True)
        write(os.path.join(newer, "machine.txt"),
              "name, driver_version\nNVIDIA H200, 580.9.9\nNVIDIA H200, 580.9.9\n")
        write(os.path.join(newer, "command.txt"), "timeout 9 kernel_bench --benchmark_out=k.json\n"
              "timeout 9 launch_bench --benchmark_out=x.json\n")
        write(os.path.join(results, "reading.md"), reading)

        # The cut file: the entry written in full is recovered, the cut one is not.
        data, complete = report.read_json(os.path.join(newer, "launch_bench.json"))
        expect(not complete, "a cut JSON file is reported incomplete")
        names = [b["name"] for b in data["benchmarks"]]
        expect(names == ["paired/launch/empty/real_time_median"], f"recovered entries: {names}")
        expect(data["context"].get("date") == "2026-11-30T12:00:00+00:00", "the context is recovered")

        perf_doc("--results", results, "--doc", doc)
        with open(doc) as f:
            text = f.read()
        charts = {}
        for name in ("perf-overhead.svg", "perf-kernels.svg"):
            with open(os.path.join(tmp, "docs", name)) as f:
                charts[name] = f.read()
        perf_doc("--results", results, "--doc", doc)  # again: the same bytes
        with open(doc) as f:
            expect(f.read() == text, "the doc is generated deterministically")
        for name, svg in charts.items():
            with open(os.path.join(tmp, "docs", name)) as f:
                expect(f.read() == svg, f"{name} is generated deterministically")

        expect(text.startswith("<!-- Generated by `python3 benchmarks/perf_doc.py`"),
               "the doc starts by saying it is generated, and by what")
        host = "Host cost per call, raw and curt alternating (medians)"
        new_host, old_host = block(text, host, "new-run"), block(text, host, "old-run")
        launch = row(new_host, "launch/empty")
        expect(f"| {new_launch:.3f} |" in launch, f"the newer run's launch row wins: {launch!r}")
        expect(not row(old_host, "launch/empty"), "the older launch row is not shown")
        expect("2 x NVIDIA H200, driver 580.9.9" in new_host and "2026-11-30 12:00 UTC" in new_host
               and "`timeout 9 launch_bench --benchmark_out=x.json`" in new_host,
               f"the newer block names card, driver, date and command: {new_host[:300]!r}")
        expect("kernel_bench" not in new_host, "a block shows the command of its own program")
        expect("**partial: the program stopped before the end** (launch_bench.json)" in new_host,
               "the cut run's table is marked partial")
        expect("partial" not in old_host, "the complete run's table is not marked partial")
        copy = row(old_host, "copy/h2d/4KiB")
        expect(f"| {copy_missed:.3f} |" in copy and "**missed**" in copy,
               f"a row the newer run did not measure comes from the older: {copy!r}")
        expect("NVIDIA H200, driver 580.1.2" in old_host
               and "`scripts/bench.sh -o OUT -r 5`" in old_host, "the older block names its run")
        expect("event_record" not in text, "the entry the cut went through is not reported")

        goals = text.split("## Goals\n", 1)[1].split("\n## ", 1)[0]
        every = [w for _, _, w in report.GOALS + report.SPEEDUP_GOALS + report.MULTI_GPU_GOALS]
        every += [g[4] for g in report.KERNEL_GOALS]
        for what in every:
            expect(row(goals, what), f"goal listed: {what}")
        expect("| not measured |" in row(goals, "event record within 3 % (hardening)"),
               "a goal without measurement is not measured")
        expect("| not measured |" in row(goals, "100 kernels as one graph at least 4x faster than "
                                                 "stream launches (graphs)"), "graph goal not measured")
        launch_goal = row(goals, "launch within 3 % (hardening)")
        expect(f"`paired/launch/empty` {new_launch:.3f}" in launch_goal and "| met |" in launch_goal
               and "`new-run`" in launch_goal, f"launch goal from the newer run: {launch_goal!r}")
        copy_goal = row(goals, "typed copies within 2 % (memory)")
        expect("| **missed** |" in copy_goal and "`old-run`" in copy_goal, f"copy goal: {copy_goal!r}")
        vec_goal = row(goals, "float4 at least 0.97x Thrust at 2^28 (examples)")
        expect(f"{vec_ratio:.3f}" in vec_goal and "| met |" in vec_goal,
               f"the kernel goal is found despite min_time in the name: {vec_goal!r}")

        runs = text.split("## Runs\n", 1)[1].split("\n## ", 1)[0]
        expect(runs.index("new-run") < runs.index("old-run"), "runs newest first")
        expect("launch_bench (**partial**)" in row(runs, "[`new-run`](../results/new-run/)"),
               f"the runs table marks the cut program: {runs!r}")
        expect("- `old-run`: made by hand for the test" in runs, "command.txt's notes are shown")
        programs = text.split("## Programs\n", 1)[1].split("\n## ", 1)[0]
        expect("| graph_bench | **not measured** |" in programs, "a program never stored: not measured")
        expect("| launch_bench | `new-run` (**partial**) |" in programs, "newest run of a program")
        expect("| g++ | 1.25 |" in text and "noise" not in text, "the compile cost table of the log")
        expect("## Reading\n\n" + reading.strip() + "\n\n## Earlier runs" in text,
               "the reading is copied verbatim, then the history link")
        expect("](performance-history.md)" in text, "the history is linked")
        expect(charts["perf-overhead.svg"].count('class="bar"') == 2
               and f">{copy_missed:.3f}<" in charts["perf-overhead.svg"],
               "the overhead chart: the newest launch and the copy")
        expect(charts["perf-kernels.svg"].count('class="bar"') == 2
               and f">{vec_ratio * thrust / copy_bw:.2f}<" in charts["perf-kernels.svg"],
               "the kernel chart: each kernel's fraction of the copy")
        expect("![curt / raw host cost per call, each goal a tick](perf-overhead.svg)" in text,
               "the doc links the charts")

        # --store: a bench.sh output directory becomes the newest run.
        out = os.path.join(tmp, "OUT")
        os.makedirs(out)
        write_json(os.path.join(out, "graph_bench.json"), "2026-12-01T08:00:00+00:00",
                   [median("graph/chain100", speedup=4.5, graph_curt_us=10.0)])
        write(os.path.join(out, "graph_bench.log"), "printed table\n")
        write(os.path.join(out, "pool_bench.json"), "")  # filtered out: nothing to keep
        write(os.path.join(out, "machine.txt"),
              "name, driver_version\nNVIDIA H200, 590.0\nNVIDIA H200, 590.0\n")
        write(os.path.join(out, "command.txt"), "scripts/bench.sh -o OUT -f graph\n")
        perf_doc("--store", out, "--results", results, "--doc", doc)
        perf_doc("--store", out, "--results", results, "--doc", doc)
        stored = os.path.join(results, "2026-12-01-h200x2")
        expect(sorted(os.listdir(stored)) == ["command.txt", "graph_bench.json", "graph_bench.log",
                                              "machine.txt"], f"stored files: {os.listdir(stored)}")
        expect(os.path.isdir(stored + "-2"), "a second run the same day gets its own id")
        with open(doc) as f:
            text = f.read()
        speedup = row(text.split("## Goals\n", 1)[1], "100 kernels as one graph at least 4x faster "
                      "than stream launches (graphs)")
        expect("4.50x" in speedup and "`2026-12-01-h200x2-2`" in speedup,
               f"the stored run is read: {speedup!r}")

    if failures:
        print("\n".join("FAILED: " + f for f in failures))
        return 1
    print("perf_doc.py: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
