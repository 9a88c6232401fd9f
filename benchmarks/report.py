#!/usr/bin/env python3
"""Turns the JSON that curt's benchmarks write (Google Benchmark's format, median aggregates)
into one markdown report: where it ran, the paired host-overhead table with each issue's goal
(met or missed), the graph speed-ups with theirs (higher is better), the kernels against their
alternatives and as fractions of the device copy, the multi-GPU copies and all-reduce, the
batched copies, the separate variants, and the compile cost when its log is there. A JSON file
cut short (its program stopped by a timeout) is read up to its last complete benchmark and
called partial.

  benchmarks/report.py LOG_DIR            # reads LOG_DIR/*_bench.json (and compile_cost.log)
  benchmarks/report.py a.json b.json ...  # or the files named
  benchmarks/report.py --svg CHART.svg LOG_DIR   # also writes the curt/raw chart (SVG)

Prints the report; scripts/bench.sh also writes it to LOG_DIR/report.md. benchmarks/perf_doc.py
imports this file for docs/performance.md: its tables, goals and charts come from here.
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
    (r"^paired/vmm_grow", 1.05, "growth to 8 GiB within 5 % of a raw VMM loop (VMM)"),
    (r"^paired/vmm_map", 1.03, "map + set_access within 3 % (VMM)"),
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


def goal_verdict(met, what):
    """A table's goal cell: met, or missed in bold, then the goal's name."""
    return ("met" if met else "**missed**") + f": {what}"


def paired_met(b):
    """(limit, what, met) of a paired run against its goal; limit None (and met) without one."""
    limit, what = goal_for(b["run_name"])
    return limit, what, limit is None or b["curt_over_raw"] <= limit


def speedup_missed(b):
    limit, _ = goal_for(b["run_name"], SPEEDUP_GOALS)
    return limit is not None and "speedup" in b and b["speedup"] < limit


def read_json(path):
    """A Google Benchmark JSON file as (data, complete). A program stopped mid-run (a timeout)
    leaves the file cut inside the "benchmarks" array: keep the context and every entry that was
    written in full, and say that the file is incomplete."""
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text), True
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    data = {"context": {}, "benchmarks": []}
    match = re.search(r'"context"\s*:\s*', text)
    if match:
        try:
            data["context"] = decoder.raw_decode(text, match.end())[0]
        except json.JSONDecodeError:
            pass
    match = re.search(r'"benchmarks"\s*:\s*\[', text)
    position = match.end() if match else len(text)
    separator = re.compile(r"\s*,?\s*")
    while True:
        position = separator.match(text, position).end()
        try:
            entry, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError:  # the cut entry, or the end of what was written
            break
        if isinstance(entry, dict):
            data["benchmarks"].append(entry)
    return data, False


# Segments Google Benchmark adds to a name for the run's settings (MinTime, UseManualTime, ...):
# not part of what was measured, and in the way of the tables' family/variant/size keys.
SETTINGS = re.compile(r"^((min_time|min_warmup_time|iterations|repeats|threads):.*|"
                      r"real_time|manual_time|process_time)$")


def benchmark_name(name):
    return "/".join(part for part in name.split("/") if not SETTINGS.match(part))


def load(paths):
    """(context of the first file, the medians (or single runs) of every file, the names of the
    files that were cut short)."""
    runs = []
    context = None
    partial = []
    for path in paths:
        if os.path.getsize(path) == 0:  # a program whose benchmarks the filter left out
            continue
        data, complete = read_json(path)
        if not complete:
            partial.append(os.path.basename(path))
        context = context or data.get("context", {})
        benchmarks = data.get("benchmarks", [])
        # Medians when the run had repetitions; the single runs otherwise.
        aggregated = any(b.get("aggregate_name") == "median" for b in benchmarks)
        for b in benchmarks:
            if (b.get("aggregate_name") == "median") if aggregated else b.get("run_type") == "iteration":
                b = dict(b)
                b["source"] = os.path.basename(path)
                b["run_name"] = benchmark_name(b.get("run_name", b["name"]))
                runs.append(b)
    return context or {}, runs, partial


def to_us(b):
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
    return b["real_time"] * scale


def build_note(build):
    """What the Google Benchmark library's build type means for the numbers."""
    if build == "release":
        return "Google Benchmark library build: release"
    return (f"Google Benchmark library build: **{build}** (not a release build): the paired "
            "numbers are timed by curt's harness around each batch and do not include its loop; "
            "the separate benchmarks' times do include it.")


def header(context, paths, partial=()):
    lines = [
        f"- device: {context.get('curt_device', 'unknown')}, CUDA driver "
        f"{context.get('curt_cuda_driver', '?')}, runtime {context.get('curt_cuda_runtime', '?')}",
        f"- host: {context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs, "
        f"date {context.get('date', '?')}",
        f"- files: {', '.join(os.path.basename(p) for p in paths)}",
        "- " + build_note(context.get("library_build_type", "unknown")),
    ]
    if partial:
        lines.append(f"- **partial: the program stopped before the end**: {', '.join(partial)} "
                     "(every benchmark written in full is reported)")
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
        limit, what, met = paired_met(b)
        verdict = ""
        if limit is not None:
            verdict = goal_verdict(met, what)
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
            verdict = goal_verdict(not speedup_missed(b), what)
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


# Benchmarks with a table of their own (each entry carries its curt and raw figures).
OWN_TABLES = ("paired/", "batch_copy/", "graph/", "multi_gpu/", "kernel/", "nvtx/")


def side_by_side(runs):
    """Separate benchmarks named family/variant: one row per family, one column per variant."""
    families = {}
    for b in runs:
        name = b["run_name"]
        if name.startswith(OWN_TABLES):
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


def nvtx_table(runs):
    """nvtx_bench: per operation with no NVTX tool attached, the empty loop, raw NVTX and curt."""
    rows = [b for b in runs if b["run_name"].startswith("nvtx/") and "curt_over_raw" in b]
    if not rows:
        return ""
    out = ["| operation | empty loop ns | raw NVTX ns | curt ns | curt / raw | curt - empty ns |",
           "|---|---:|---:|---:|---:|---:|"]
    for b in sorted(rows, key=lambda b: b["run_name"]):
        out.append(f"| `{b['run_name']}` | {b['empty_ns']:.2f} | {b['raw_ns']:.2f} | "
                   f"{b['curt_ns']:.2f} | {b['curt_over_raw']:.3f} | {b['curt_minus_empty_ns']:.2f} |")
    return "\n".join(out)


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


def bars_svg(title, bars, low, high, reference):
    """A plain SVG bar chart (no plotting library): one bar per (label, value, text, colour, goal
    or None) from `low`, a tick at the goal, a dashed line at `reference` (parity, or the copy)."""
    label_w, bar_w, row_h, top = 260, 420, 22, 30
    x = lambda value: label_w + (min(max(value, low), high) - low) / (high - low) * bar_w
    height = top + row_h * len(bars) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 120}" '
           f'height="{height}" font-family="sans-serif" font-size="12">',
           f'<text x="10" y="18">{title}</text>']
    for i, (label, value, text, colour, goal) in enumerate(bars):
        y = top + i * row_h
        out.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{label}</text>')
        out.append(f'<rect class="bar" x="{x(low):.1f}" y="{y + 4}" width="{x(value) - x(low):.1f}" '
                   f'height="{row_h - 8}" fill="{colour}"/>')
        out.append(f'<text x="{x(value) + 4:.1f}" y="{y + 15}">{text}</text>')
        if goal is not None:
            out.append(f'<line class="goal" x1="{x(goal):.1f}" x2="{x(goal):.1f}" y1="{y + 2}" '
                       f'y2="{y + row_h - 2}" stroke="black" stroke-width="2"/>')
    bottom = top + row_h * len(bars)
    out.append(f'<line x1="{x(reference):.1f}" x2="{x(reference):.1f}" y1="{top}" y2="{bottom}" '
               f'stroke="gray" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{x(reference):.1f}" y="{bottom + 16}" text-anchor="middle">'
               f'{reference:.1f}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def overhead_svg(runs):
    """A bar per paired operation: curt / raw, with the 1.0 line and the operation's goal as a
    tick, so that a reader sees at a glance which costs sit at parity and which exceed a goal."""
    rows = sorted((b for b in runs if b["run_name"].startswith("paired/") and "curt_over_raw" in b),
                  key=lambda b: b["run_name"])
    if not rows:
        return ""
    bars = []
    for b in rows:
        ratio = b["curt_over_raw"]
        goal, _, met = paired_met(b)
        bars.append((b["run_name"][len("paired/"):], ratio, f"{ratio:.3f}",
                     "#2e86c1" if met else "#c0392b", goal))
    high = max([1.10] + [b["curt_over_raw"] + 0.01 for b in rows])
    return bars_svg("curt / raw host cost per call (median); tick: the goal", bars, 0.95, high, 1.0)


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
                   missed=False, goal_index=None, value="")
        for index, (pattern, goal_size, kind, limit, what) in enumerate(KERNEL_GOALS):
            if re.search(pattern, family) and (goal_size is None or goal_size == size):
                if kind == "bw":
                    met = row["ratio"] >= limit
                    row["goal"] = f">= {limit:g}x"
                    row["value"] = f"{row['ratio']:.3f}"
                else:
                    time_ratio = a_gb / c_gb if c_gb > 0 else float("inf")
                    met = time_ratio <= limit
                    row["goal"] = f"time <= {limit:g}x ({time_ratio:.2f}x)"
                    row["value"] = f"time {time_ratio:.2f}x"
                row["missed"] = not met
                row["goal_index"] = index
                row["verdict"] = goal_verdict(met, what)
                break
        rows.append(row)

    return sorted(rows, key=lambda r: (r["family"], size_order(r["size"]), r["size"]))


def size_order(size):
    """A kernel size for ordering: 65536 before 268435456 (as numbers); 0 for 8192x8192."""
    return int(size) if size.isdigit() else 0


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


def kernel_copy_rows(runs):
    """Every kernel measurement with its bandwidth as a fraction of the device-to-device copy of
    the same bytes (counter of_copy), whether or not its pair was measured; alternative: Thrust,
    CUB or the copy kernel rather than curt's example."""
    rows = []
    for b in runs:
        key = kernel_key(b["run_name"])
        if key and "of_copy" in b:
            family, variant, size = key
            alternative = any(re.search(pattern, family) and variant == alt
                              for pattern, _, alt in KERNEL_PAIRS)
            rows.append(dict(family=family, variant=variant, size=size, gb=kernel_gb_per_s(b),
                             copy=b.get("copy_gb_per_s"), of_copy=b["of_copy"],
                             alternative=alternative))
    return sorted(rows, key=lambda r: (r["family"], size_order(r["size"]), r["size"], r["variant"]))


def kernel_copy_table(runs):
    rows = kernel_copy_rows(runs)
    if not rows:
        return ""
    out = ["| kernel: variant | size | GB/s | copy GB/s | of copy |", "|---|---|---:|---:|---:|"]
    for r in rows:
        variant = r["variant"] + (" (alternative)" if r["alternative"] else "")
        copy = "-" if r["copy"] is None else f"{r['copy']:.1f}"
        out.append(f"| {r['family']}: {variant} | {r['size']} | {r['gb']:.1f} | {copy} | "
                   f"{r['of_copy']:.3f} |")
    out.append("\nof copy: GB/s over that of a device-to-device copy of the same bytes in the same "
               "run; at tens of MiB and less the copy is far from full bandwidth (latency), so "
               "fractions over 1 are expected there.")
    return "\n".join(out)


def short_size(size):
    """268435456 as 2^28 (a chart label); other sizes as they are."""
    if size.isdigit() and int(size) > 1 and int(size) & (int(size) - 1) == 0:
        return f"2^{int(size).bit_length() - 1}"
    return size


def kernel_copy_svg(runs):
    """A bar per kernel measurement: its fraction of the device copy, the copy as the dashed 1.0
    line; curt's examples in blue, the alternatives in gray."""
    rows = kernel_copy_rows(runs)
    if not rows:
        return ""
    bars = [(f"{r['family']} {r['variant']} {short_size(r['size'])}", r["of_copy"],
             f"{r['of_copy']:.2f}", "#95a5a6" if r["alternative"] else "#2e86c1", None)
            for r in rows]
    high = max([1.1] + [r["of_copy"] + 0.05 for r in rows])
    return bars_svg("kernel GB/s / device-to-device copy GB/s, same bytes (median); gray: the "
                    "alternative", bars, 0.0, high, 1.0)


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
                   ratio=b["curt_over_raw"], goal="", verdict="", missed=False, note=None,
                   order=order + (multi_gpu_size(size),))
        limit, note = goal_for(b["run_name"], MULTI_GPU_GOALS)
        if limit is not None:
            row["note"] = note
            met = row["ratio"] >= limit
            row["goal"] = f">= {limit:g}x"
            row["missed"] = not met
            row["verdict"] = goal_verdict(met, note)
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


def compile_cost(directory):
    path = os.path.join(directory, "compile_cost.log") if directory else None
    if not path or not os.path.exists(path):
        return ""
    with open(path) as f:
        return "\n".join(line.rstrip() for line in f if line.startswith("|"))


def goal_results(runs):
    """Every goal of the tables above (GOALS, SPEEDUP_GOALS, KERNEL_GOALS, MULTI_GPU_GOALS), in
    that order, judged as the tables judge it: dicts of what, limit and results, a list of
    (benchmark, value, met). A goal without results was not measured."""
    goals = []
    paired = [b for b in runs if b["run_name"].startswith("paired/") and "curt_over_raw" in b]
    for _, limit, what in GOALS:
        goals.append(dict(what=what, limit=f"curt / raw <= {limit:.2f}", results=[
            (b["run_name"], f"{b['curt_over_raw']:.3f}", paired_met(b)[2])
            for b in paired if goal_for(b["run_name"]) == (limit, what)]))
    graphs = [b for b in runs if b["run_name"].startswith("graph/") and "speedup" in b]
    for _, limit, what in SPEEDUP_GOALS:
        goals.append(dict(what=what, limit=f"speed-up >= {limit:g}x", results=[
            (b["run_name"], f"{b['speedup']:.2f}x", not speedup_missed(b))
            for b in graphs if goal_for(b["run_name"], SPEEDUP_GOALS) == (limit, what)]))
    kernels = kernel_rows(runs)
    for index, (_, _, kind, limit, what) in enumerate(KERNEL_GOALS):
        goals.append(dict(what=what, limit=(f"curt / alternative GB/s >= {limit:g}x" if kind == "bw"
                                            else f"curt time / alternative time <= {limit:g}x"),
                          results=[(r["name"], r["value"], not r["missed"])
                                   for r in kernels if r["goal_index"] == index]))
    multi = multi_gpu_rows(runs)
    for _, limit, what in MULTI_GPU_GOALS:
        goals.append(dict(what=what, limit=f"curt / raw GB/s >= {limit:g}x", results=[
            (r["name"], f"{r['ratio']:.3f}", not r["missed"]) for r in multi if r["note"] == what]))
    return goals


def row_key(name):
    """What one row of a table is made of, so that a row always comes from one run: a kernel
    family and size (its variants are compared), a separate benchmark's family (its variants side
    by side), or else the benchmark itself (paired, graph, multi-GPU and batch rows carry their
    curt and raw figures in one entry)."""
    key = kernel_key(name)
    if key:
        return "kernel", key[0], key[2]
    if name.startswith(OWN_TABLES):
        return name
    return name.rpartition("/")[0] or name


# The report's tables in order, (title, function of the runs); also docs/performance.md's.
TABLES = [
    ("Host cost per call, raw and curt alternating (medians)", paired_table),
    ("Graphs: GPU time of the same kernels, one graph launch vs stream launches (medians)",
     graph_table),
    ("Kernels: the examples' kernels against the best alternative (medians)", kernel_table),
    ("Kernels: every measurement as a fraction of the device copy (medians)", kernel_copy_table),
    ("Multi-GPU: peer copies and NCCL all-reduce, curt and raw in one run (medians)",
     multi_gpu_table),
    ("Batched copies", batch_table),
    ("NVTX with no tool attached: per operation, the three rotated in one run (medians)",
     nvtx_table),
    ("Separate benchmarks (medians; GPU time for gpu_time/*)", side_by_side),
]


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
    context, runs, partial = load(paths)
    sections = [("Where", header(context, paths, partial))]
    sections += [(title, table(runs)) for title, table in TABLES]
    sections.append(("Compile cost", compile_cost(directory)))
    if svg_path:
        chart = overhead_svg(runs)
        if chart:
            with open(svg_path, "w") as f:
                f.write(chart)
            sections.insert(2, ("Chart", f"![curt / raw, host cost per call]({os.path.basename(svg_path)})"))
    print("\n\n".join(f"### {title}\n\n{body}" for title, body in sections if body))
    missed = [name for goal in goal_results(runs) for name, _, met in goal["results"] if not met]
    if missed:
        print(f"\nGoals missed: {', '.join(missed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
