#!/usr/bin/env python3
"""Turns the JSON that curt's benchmarks write (Google Benchmark's format, median aggregates)
into one markdown report: where it ran, the paired host-overhead table with each issue's goal
(met or missed), the graph speed-ups with theirs (higher is better), GPU times and bandwidths
side by side, the batched copies, the separate variants, and the compile cost when its log is
there.

  benchmarks/report.py LOG_DIR            # reads LOG_DIR/*_bench.json (and compile_cost.log)
  benchmarks/report.py a.json b.json ...  # or the files named
  benchmarks/report.py --svg CHART.svg LOG_DIR   # also writes the curt/raw chart (SVG)

Prints the report; scripts/bench.sh also writes it to LOG_DIR/report.md for docs/performance.md.
"""
import glob
import json
import os
import re
import sys

# The targets the issues set, by benchmark name: (pattern, highest curt / raw, what).
GOALS = [
    (r"^paired/launch/", 1.03, "launch within 3 % (hardening)"),
    (r"^paired/event_record/", 1.03, "event record within 3 % (hardening)"),
    (r"^paired/stream_wait", 1.03, "stream wait within 3 % (hardening)"),
    (r"^paired/copy/", 1.02, "typed copies within 2 % (memory)"),
    (r"^paired/(pool|current)", 1.05, "pool allocate + free within 5 % (memory)"),
    (r"^paired/graph/launch", 1.02, "graph launch within 2 % (graphs)"),
    (r"^paired/graph/build", 1.05, "graph build + instantiate within 5 % (graphs)"),
]

# Speed-ups the issues set, where higher is better: (pattern, lowest speed-up, what).
SPEEDUP_GOALS = [
    (r"^graph/chain", 4.0, "100 kernels as one graph at least 4x faster than stream launches (graphs)"),
]


def goal_for(name, goals=GOALS):
    for pattern, limit, what in goals:
        if re.search(pattern, name):
            return limit, what
    return None, None


def speedup_missed(b):
    limit, _ = goal_for(b["run_name"], SPEEDUP_GOALS)
    return limit is not None and "speedup" in b and b["speedup"] < limit


def load(paths):
    runs = []
    context = None
    for path in paths:
        if os.path.getsize(path) == 0:  # a program whose benchmarks the filter left out
            continue
        with open(path) as f:
            data = json.load(f)
        context = context or data.get("context", {})
        benchmarks = data.get("benchmarks", [])
        # Medians when the run had repetitions; the single runs otherwise.
        aggregated = any(b.get("aggregate_name") == "median" for b in benchmarks)
        for b in benchmarks:
            if (b.get("aggregate_name") == "median") if aggregated else b.get("run_type") == "iteration":
                b = dict(b)
                b["source"] = os.path.basename(path)
                b["run_name"] = re.sub(r"/(real|manual)_time$", "", b.get("run_name", b["name"]))
                runs.append(b)
    return context or {}, runs


def to_us(b):
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
    return b["real_time"] * scale


def header(context, paths):
    build = context.get("library_build_type", "unknown")
    lines = [
        f"- device: {context.get('curt_device', 'unknown')}, CUDA driver "
        f"{context.get('curt_cuda_driver', '?')}, runtime {context.get('curt_cuda_runtime', '?')}",
        f"- host: {context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs, "
        f"date {context.get('date', '?')}",
        f"- files: {', '.join(os.path.basename(p) for p in paths)}",
    ]
    if build != "release":
        lines.append(
            f"- Google Benchmark library build: **{build}** (not a release build): the paired "
            "numbers are timed by curt's harness around each batch and do not include its loop; "
            "the separate benchmarks' times do include it."
        )
    else:
        lines.append("- Google Benchmark library build: release")
    return "\n".join(lines)


def paired_table(runs):
    rows = [b for b in runs if b["run_name"].startswith("paired/") and "curt_over_raw" in b]
    if not rows:
        return ""
    out = [
        "| operation | raw ns | curt ns | curt / raw | goal | |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for b in sorted(rows, key=lambda b: b["run_name"]):
        limit, what = goal_for(b["run_name"])
        verdict = ""
        if limit is not None:
            verdict = ("met" if b["curt_over_raw"] <= limit else "**missed**") + f": {what}"
        out.append(
            f"| {b['run_name'][len('paired/'):]} | {b['raw_ns']:.1f} | {b['curt_ns']:.1f} | "
            f"{b['curt_over_raw']:.3f} | {'' if limit is None else f'{limit:.2f}'} | {verdict} |"
        )
    extra = [b for b in rows if "malloc_ns" in b]
    for b in extra:
        out.append(
            f"\n{b['run_name']}: `cudaMalloc` + `cudaFree` in the same run {b['malloc_ns'] / 1000:.1f} µs "
            f"({b['malloc_over_raw']:.0f}x the raw pool pair)"
        )
    return "\n".join(out)


def graph_table(runs):
    """The graph speed-ups (graph_bench's graph/*): GPU time of the same kernels as one graph
    launch and as stream launches; the speed-up is stream / graph, so higher is better."""
    rows = [b for b in runs if b["run_name"].startswith("graph/") and "speedup" in b]
    if not rows:
        return ""

    def us(b, counter):
        return f"{b[counter]:.1f}" if counter in b else "-"

    out = [
        "| kernels | graph, curt µs | graph, raw µs | stream, curt::launch µs | stream, <<<>>> µs | "
        "speed-up curt | speed-up raw | goal | |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for b in sorted(rows, key=lambda b: b["run_name"]):
        limit, what = goal_for(b["run_name"], SPEEDUP_GOALS)
        verdict, goal = "", ""
        if limit is not None:
            verdict = ("**missed**" if speedup_missed(b) else "met") + f": {what}"
            goal = f">= {limit:g}x"
        raw = f"{b['speedup_raw']:.2f}x" if "speedup_raw" in b else "-"
        out.append(
            f"| {b['run_name'][len('graph/'):]} | {us(b, 'graph_curt_us')} | {us(b, 'graph_raw_us')} | "
            f"{us(b, 'stream_curt_us')} | {us(b, 'stream_chevron_us')} | {b['speedup']:.2f}x | "
            f"{raw} | {goal} | {verdict} |"
        )
    out.append(
        "\nspeed-up: stream GPU time / graph GPU time, higher is better (curt: curt::launch loop "
        "over curt::graph_exec::launch; raw: <<<>>> loop over cudaGraphLaunch)"
    )
    return "\n".join(out)


def side_by_side(runs):
    """Separate benchmarks named family/variant: one row per family, one column per variant."""
    families = {}
    for b in runs:
        name = b["run_name"]
        if name.startswith(("paired/", "batch_copy/", "graph/", "multi_gpu/", "kernel/")):  # their own tables
            continue
        family, _, variant = name.rpartition("/")
        if not family:
            family, variant = name, "value"
        families.setdefault(family, {})[variant] = b
    if not families:
        return ""
    out = []
    for family in sorted(families):
        variants = families[family]
        cells = []
        for variant in sorted(variants):
            b = variants[variant]
            cell = f"{variant} {to_us(b):.3f} µs"
            if "bytes_per_second" in b:
                cell += f" ({b['bytes_per_second'] / 1e9:.0f} GB/s)"
            cells.append(cell)
        ratio = ""
        if "raw" in variants and "curt" in variants:
            ratio = f"{to_us(variants['curt']) / to_us(variants['raw']):.3f}"
        elif "launch_kernel_ex" in variants and "curt" in variants:
            ratio = f"{to_us(variants['curt']) / to_us(variants['launch_kernel_ex']):.3f}"
        out.append(f"| {family} | {'; '.join(cells)} | {ratio} |")
    return "\n".join(["| benchmark | median per variant | curt / raw |", "|---|---|---:|"] + out)


def batch_table(runs):
    rows = [b for b in runs if b["run_name"].startswith("batch_copy/")]
    if not rows:
        return ""
    out = [
        "| copies | loop of cudaMemcpyAsync GPU / host µs | raw batch GPU / host µs | "
        "batch / loop (GPU, host) | curt / raw batch (GPU, host) |",
        "|---|---:|---:|---:|---:|",
    ]
    for b in rows:
        out.append(
            f"| {b['run_name'][len('batch_copy/'):]} | {b['loop_gpu_us']:.0f} / {b['loop_host_us']:.0f} | "
            f"{b['raw_batch_gpu_us']:.0f} / {b['raw_batch_host_us']:.0f} | "
            f"{b['raw_over_loop_gpu']:.2f}, {b['raw_over_loop_host']:.2f} | "
            f"{b['curt_over_raw_gpu']:.3f}, {b['curt_over_raw_host']:.3f} |"
        )
    return "\n".join(out)


def overhead_svg(runs):
    """A bar per paired operation: curt / raw, with the 1.0 line and the operation's goal as a
    tick, so that a reader sees at a glance which costs sit at parity and which exceed a goal.
    Plain SVG, no plotting library."""
    rows = sorted((b for b in runs if b["run_name"].startswith("paired/") and "curt_over_raw" in b),
                  key=lambda b: b["run_name"])
    if not rows:
        return ""
    label_w, bar_w, row_h, top = 260, 420, 22, 30
    low, high = 0.95, max([1.10] + [b["curt_over_raw"] + 0.01 for b in rows])
    x = lambda ratio: label_w + (min(max(ratio, low), high) - low) / (high - low) * bar_w
    height = top + row_h * len(rows) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 120}" '
           f'height="{height}" font-family="sans-serif" font-size="12">',
           f'<text x="{label_w}" y="18">curt / raw host cost per call (median); '
           f'tick: the goal</text>']
    for i, b in enumerate(rows):
        y = top + i * row_h
        ratio = b["curt_over_raw"]
        goal, _ = goal_for(b["run_name"])
        over = goal is not None and ratio > goal
        name = b["run_name"][len("paired/"):]
        out.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{name}</text>')
        out.append(f'<rect class="bar" x="{x(low):.1f}" y="{y + 4}" width="{x(ratio) - x(low):.1f}" '
                   f'height="{row_h - 8}" fill="{"#c0392b" if over else "#2e86c1"}"/>')
        out.append(f'<text x="{x(ratio) + 4:.1f}" y="{y + 15}">{ratio:.3f}</text>')
        if goal is not None:
            out.append(f'<line class="goal" x1="{x(goal):.1f}" x2="{x(goal):.1f}" y1="{y + 2}" '
                       f'y2="{y + row_h - 2}" stroke="black" stroke-width="2"/>')
    bottom = top + row_h * len(rows)
    out.append(f'<line x1="{x(1.0):.1f}" x2="{x(1.0):.1f}" y1="{top}" y2="{bottom}" '
               f'stroke="gray" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{x(1.0):.1f}" y="{bottom + 16}" text-anchor="middle">1.0</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# The kernel suite (kernel_bench's kernel/*): per family, the curt variant that the goal is about
# (None: the fastest of the example's variants) and the alternative it is measured against.
KERNEL_PAIRS = [
    (r"^vec_add$", "float4", "thrust"),
    (r"^reduce_", None, "cub"),
    (r"^histogram/", "auto", "cub"),
    (r"^transpose$", "tiled64", "copy_kernel"),
]

# The issues' kernel goals: (family pattern, size or None for any, kind, limit, what). kind "bw":
# curt GB/s / alternative GB/s at least limit; "time": curt time / alternative time at most limit
# (the same bytes: alternative GB/s / curt GB/s).
KERNEL_GOALS = [
    (r"^vec_add$", "268435456", "bw", 0.97, "float4 at least 0.97x Thrust at 2^28 (examples)"),
    (r"^reduce_(sum|max)_", "268435456", "bw", 0.97, "at least 0.97x CUB at 2^28 (examples)"),
    (r"^reduce_(sum|max)_", "65536", "time", 1.2, "at most 1.2x CUB's time at 2^16 (examples)"),
    (r"^histogram/uniform$", None, "bw", 1.7, "at least 1.7x CUB, uniform (examples)"),
    (r"^histogram/skewed$", None, "bw", 1.15, "at least 1.15x CUB, skewed (examples)"),
    (r"^transpose$", None, "bw", 0.9, "tiled 64x64 at least 0.9x the copy kernel (examples)"),
]


def kernel_key(name):
    """kernel/<family>/<variant>/<size> (histograms: kernel/histogram/<variant>/<input>/<size>)
    as (family, variant, size); None for other names."""
    parts = name.split("/")
    if parts[0] != "kernel" or len(parts) < 4:
        return None
    if parts[1] == "histogram" and len(parts) >= 5:
        return f"histogram/{parts[3]}", parts[2], "/".join(parts[4:])
    return parts[1], parts[2], "/".join(parts[3:])


def kernel_gb_per_s(b):
    if "gb_per_s" in b:
        return b["gb_per_s"]
    return b.get("bytes_per_second", 0.0) / 1e9


def kernel_rows(runs):
    """One dict per (family, size) that has both its curt variant and its alternative: names,
    GB/s, fractions of copy, the ratio curt / alternative (GB/s), the goal and its verdict."""
    groups = {}
    for b in runs:
        key = kernel_key(b["run_name"])
        if key:
            family, variant, size = key
            groups.setdefault((family, size), {})[variant] = b
    rows = []
    for (family, size), variants in groups.items():
        pair = next(((curt, alt) for pattern, curt, alt in KERNEL_PAIRS if re.search(pattern, family)),
                    None)
        if pair is None or pair[1] not in variants:
            continue
        curt, alt = pair
        if curt is None:  # the fastest of the others
            others = [v for v in variants if v != alt]
            curt = max(others, key=lambda v: kernel_gb_per_s(variants[v])) if others else None
        if curt not in variants:
            continue
        c, a = variants[curt], variants[alt]
        c_gb, a_gb = kernel_gb_per_s(c), kernel_gb_per_s(a)
        row = dict(family=family, size=size, curt=curt, alt=alt, curt_gb=c_gb, alt_gb=a_gb,
                   ratio=c_gb / a_gb if a_gb > 0 else 0.0, curt_of_copy=c.get("of_copy"),
                   alt_of_copy=a.get("of_copy"), name=c["run_name"], goal="", verdict="",
                   missed=False)
        for pattern, goal_size, kind, limit, what in KERNEL_GOALS:
            if re.search(pattern, family) and (goal_size is None or goal_size == size):
                if kind == "bw":
                    met = row["ratio"] >= limit
                    row["goal"] = f">= {limit:g}x"
                else:
                    time_ratio = a_gb / c_gb if c_gb > 0 else float("inf")
                    met = time_ratio <= limit
                    row["goal"] = f"time <= {limit:g}x ({time_ratio:.2f}x)"
                row["missed"] = not met
                row["verdict"] = ("met" if met else "**missed**") + f": {what}"
                break
        rows.append(row)

    def order(r):
        return r["family"], int(r["size"]) if r["size"].isdigit() else 0, r["size"]

    return sorted(rows, key=order)


def kernel_table(runs):
    rows = kernel_rows(runs)
    if not rows:
        return ""

    def frac(value):
        return "-" if value is None else f"{value:.2f}"

    out = [
        "| kernel | size | curt variant | GB/s | alternative | GB/s | curt / alt | curt of copy | "
        "alt of copy | goal | |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['family']} | {r['size']} | {r['curt']} | {r['curt_gb']:.1f} | {r['alt']} | "
            f"{r['alt_gb']:.1f} | {r['ratio']:.3f} | {frac(r['curt_of_copy'])} | "
            f"{frac(r['alt_of_copy'])} | {r['goal']} | {r['verdict']} |"
        )
    out.append(
        "\nGB/s: bytes read plus written per GPU time (medians); of copy: that bandwidth over the "
        "device-to-device copy's measured in the same run; curt / alt: the GB/s ratio (higher is "
        "better); reductions without a fixed variant show the fastest of the example's."
    )
    return "\n".join(out)


def kernel_missed(runs):
    return [r["name"] for r in kernel_rows(runs) if r["missed"]]


# The multi-GPU goals (multi_gpu_bench's multi_gpu/*), where curt / raw bandwidth is at least
# the limit (higher is better): (pattern, lowest curt / raw, what).
MULTI_GPU_GOALS = [
    (r"^multi_gpu/peer_copy/", 0.9, "peer copy at least 0.9x cudaMemcpyPeerAsync (multi-GPU)"),
    (r"^multi_gpu/nccl_all_reduce/", 0.98,
     "all-reduce bus bandwidth at least 0.98x ncclAllReduce (multi-GPU)"),
]


def multi_gpu_size(size):
    """'64MiB' / '1GiB' as bytes, for ordering; 0 when it is neither."""
    m = re.match(r"^(\d+)(MiB|GiB)$", size)
    return int(m.group(1)) << (20 if m.group(2) == "MiB" else 30) if m else 0


def multi_gpu_rows(runs):
    """One dict per multi_gpu/* run with its counters: what, size, raw and curt GB/s (bus
    bandwidth for the all-reduce), ratio, goal and verdict."""
    rows = []
    directions = {"0to1": 0, "1to0": 1, "bidirectional": 2}
    for b in runs:
        parts = b["run_name"].split("/")
        if parts[0] != "multi_gpu" or "curt_over_raw" not in b:
            continue
        kind, size = parts[1], parts[-1]
        if kind in ("peer_copy", "peer_copy_no_access") and len(parts) == 4:
            what = f"peer copy {parts[2]}" + (", no peer access" if kind.endswith("no_access") else "")
            raw, curt = b.get("raw_GBps"), b.get("curt_GBps")
            order = (0 if kind == "peer_copy" else 1, directions.get(parts[2], 3))
        elif kind == "nccl_all_reduce" and len(parts) == 3:
            ranks = int(b.get("ranks", 0))
            what = f"NCCL all-reduce, bus bandwidth, {ranks} GPUs"
            raw, curt = b.get("raw_busbw_GBps"), b.get("curt_busbw_GBps")
            order = (2, 0)
        else:
            continue
        row = dict(name=b["run_name"], what=what, size=size, raw=raw, curt=curt,
                   ratio=b["curt_over_raw"], goal="", verdict="", missed=False,
                   order=order + (multi_gpu_size(size),))
        limit, note = goal_for(b["run_name"], MULTI_GPU_GOALS)
        if limit is not None:
            met = row["ratio"] >= limit
            row["goal"] = f">= {limit:g}x"
            row["missed"] = not met
            row["verdict"] = ("met" if met else "**missed**") + f": {note}"
        rows.append(row)
    return sorted(rows, key=lambda r: r["order"])


def multi_gpu_table(runs):
    rows = multi_gpu_rows(runs)
    if not rows:
        return ""

    def gb(value):
        return "-" if value is None else f"{value:.1f}"

    out = [
        "| operation | size | raw GB/s | curt GB/s | curt / raw | goal | |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['what']} | {r['size']} | {gb(r['raw'])} | {gb(r['curt'])} | {r['ratio']:.3f} | "
            f"{r['goal']} | {r['verdict']} |"
        )
    out.append(
        "\npeer copy: bytes moved per GPU time (both directions summed when bidirectional), "
        "curt::copy against cudaMemcpyPeerAsync; all-reduce: bus bandwidth (algorithm bandwidth x "
        "2 (n-1) / n), curt::all_reduce against ncclAllReduce, size per GPU; curt / raw: median "
        "of the per-iteration bandwidth ratios (higher is better)."
    )
    return "\n".join(out)


def multi_gpu_missed(runs):
    return [r["name"] for r in multi_gpu_rows(runs) if r["missed"]]


def compile_cost(directory):
    path = os.path.join(directory, "compile_cost.log") if directory else None
    if not path or not os.path.exists(path):
        return ""
    with open(path) as f:
        return "\n".join(line.rstrip() for line in f if line.startswith("|"))


def main(argv):
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    svg_path = None
    if len(argv) >= 2 and argv[0] == "--svg":  # also write the overhead chart there
        svg_path, argv = argv[1], argv[2:]
    directory = argv[0] if len(argv) == 1 and os.path.isdir(argv[0]) else None
    paths = sorted(glob.glob(os.path.join(directory, "*_bench.json"))) if directory else argv
    if not paths:
        print(f"report.py: no *_bench.json in {argv[0]}", file=sys.stderr)
        return 1
    context, runs = load(paths)
    sections = [
        ("Where", header(context, paths)),
        ("Host cost per call, raw and curt alternating (medians)", paired_table(runs)),
        ("Graphs: GPU time of the same kernels, one graph launch vs stream launches (medians)",
         graph_table(runs)),
        ("Kernels: the examples' kernels against the best alternative (medians)",
         kernel_table(runs)),
        ("Multi-GPU: peer copies and NCCL all-reduce, curt and raw in one run (medians)",
         multi_gpu_table(runs)),
        ("Batched copies", batch_table(runs)),
        ("Separate benchmarks (medians; GPU time for gpu_time/*)", side_by_side(runs)),
        ("Compile cost", compile_cost(directory)),
    ]
    if svg_path:
        chart = overhead_svg(runs)
        if chart:
            with open(svg_path, "w") as f:
                f.write(chart)
            sections.insert(2, ("Chart", f"![curt / raw, host cost per call]({os.path.basename(svg_path)})"))
    print("\n\n".join(f"### {title}\n\n{body}" for title, body in sections if body))
    missed = [b["run_name"] for b in runs if b["run_name"].startswith("paired/")
              and goal_for(b["run_name"])[0] is not None
              and b.get("curt_over_raw", 0) > goal_for(b["run_name"])[0]]
    missed += [b["run_name"] for b in runs if speedup_missed(b)]
    missed += multi_gpu_missed(runs)
    missed += kernel_missed(runs)
    if missed:
        print(f"\nGoals missed: {', '.join(missed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
