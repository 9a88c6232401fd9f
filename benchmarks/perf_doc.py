#!/usr/bin/env python3
"""docs/performance.md from the stored benchmark runs, so that the doc and the JSON agree.

  benchmarks/perf_doc.py                            # regenerate docs/performance.md, docs/perf-*.svg
  benchmarks/perf_doc.py --store OUT [--run-id ID]  # first store scripts/bench.sh's OUT as a run
  benchmarks/perf_doc.py --results DIR --doc FILE   # other places (the tests)

A stored run is docs/results/<run-id>/: the programs' Google Benchmark JSON (*_bench.json, cut
short when a timeout stopped the program) and logs, machine.txt (nvidia-smi's CSV), command.txt
(the command that made it; lines starting with # are notes) and, when measured, compile_cost.log.
For each of report.py's tables the doc shows every row from the newest run that measured it,
and which run that was (card, driver, date, command); every goal of report.py's goal tables
appears, met, missed or not measured; the charts are written next to the doc. Then the hand-kept
reading (docs/results/reading.md, verbatim) and a link to docs/performance-history.md. The output
depends on the stored files only: the same runs give the same bytes.
"""
import argparse
import glob
import os
import re
import shutil
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import report  # noqa: E402  (the tables, goals and charts: one place for all of them)

ROOT = os.path.dirname(here)
PARTIAL = "partial: the program stopped before the end"
# The charts, written next to the doc: (file, function of the entries, alt text).
CHARTS = [
    ("perf-overhead.svg", report.overhead_svg, "curt / raw host cost per call, each goal a tick"),
    ("perf-kernels.svg", report.kernel_copy_svg,
     "kernel bandwidth as a fraction of the device-to-device copy"),
]


def read_machine(path):
    """nvidia-smi --format=csv: a header line, then one line per GPU; other lines are ignored."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    if not lines:
        return []
    header = [re.sub(r"\s*\[.*\]$", "", h.strip()) for h in lines[0].split(",")]  # no units
    rows = [[cell.strip() for cell in line.split(",")] for line in lines[1:]]
    return [dict(zip(header, row)) for row in rows if len(row) == len(header)]


def read_command(path):
    """command.txt as (command lines, notes)."""
    commands, notes = [], []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("#"):
                    notes.append(line.lstrip("#").strip())
                elif line:
                    commands.append(line)
    return commands, notes


def json_paths(directory):
    # An empty file is a program whose benchmarks the filter left out: nothing to keep.
    paths = sorted(glob.glob(os.path.join(directory, "*_bench.json")))
    return [p for p in paths if os.path.getsize(p)]


class Run:
    """One stored run: what it measured (report.load's medians), on what, with which command."""

    def __init__(self, directory):
        self.id = os.path.basename(os.path.normpath(directory))
        self.directory = directory
        paths = json_paths(directory)
        self.programs = [os.path.basename(p)[:-len(".json")] for p in paths]
        self.context, self.entries, self.partial = report.load(paths)
        self.gpus = read_machine(os.path.join(directory, "machine.txt"))
        self.commands, self.notes = read_command(os.path.join(directory, "command.txt"))
        self.compile_cost = report.compile_cost(directory)
        self.date = self.context.get("date", "")

    def card(self):
        names = [g.get("name", "?") for g in self.gpus] or [self.context.get("curt_device", "?")]
        if len(names) > 1 and len(set(names)) == 1:
            return f"{len(names)} x {names[0]}"
        return ", ".join(names)

    def driver(self):
        return self.gpus[0].get("driver_version", "?") if self.gpus else "?"

    def cuda(self):
        driver = self.context.get("curt_cuda_driver", "?")
        runtime = self.context.get("curt_cuda_runtime", "?")
        if driver == runtime == "?":
            return "no CUDA call"  # a host-only benchmark (nvtx_bench)
        return f"CUDA {driver}" if driver == runtime else f"CUDA driver {driver}, runtime {runtime}"

    def when(self):
        m = re.match(r"^(\d{4}-\d\d-\d\d)T(\d\d:\d\d)(:\d\d)?(\+00:00|Z)$", self.date)
        if m:
            return f"{m.group(1)} {m.group(2)} UTC"
        return self.date.replace("T", " ") or "date unknown"

    def command_for(self, sources):
        """The command lines that ran these JSON files (a line naming the program), else all."""
        programs = [s[:-len(".json")] for s in sources]
        lines = [c for c in self.commands if any(p in c for p in programs)] or self.commands
        return "; ".join(f"`{c}`" for c in lines) or "command not recorded"

    def describe(self, sources=None):
        """The run in one line: card, driver, date and command."""
        sources = self.programs_json() if sources is None else sources
        text = (f"run `{self.id}`: {self.card()}, driver {self.driver()}, {self.cuda()}, "
                f"{self.when()}; {self.command_for(sources)}")
        cut = [s for s in sources if s in self.partial]
        if cut:
            text += f"\n\n**{PARTIAL}** ({', '.join(cut)}): only the benchmarks it finished are here."
        return text

    def programs_json(self):
        return [p + ".json" for p in self.programs]


def load_runs(results):
    """Every stored run, newest first (by the JSON's date, then id)."""
    runs = [Run(d) for d in sorted(glob.glob(os.path.join(results, "*", ""))) if json_paths(d)]
    return sorted(runs, key=lambda r: (r.date, r.id), reverse=True)


def latest(runs):
    """{run id: its entries that are the newest of their table row} (report.row_key: a row, with
    its curt and raw or its variants, always comes whole from one run)."""
    owner, chosen = {}, {run.id: [] for run in runs}
    for run in runs:  # newest first: the first run to measure a row keeps it
        for b in run.entries:
            if owner.setdefault(report.row_key(b["run_name"]), run.id) == run.id:
                chosen[run.id].append(b)
    return chosen


def cell(text):
    return text.replace("|", "\\|")


def runs_table(runs, doc_dir):
    out = ["| run | card | driver | CUDA | date | programs | Google Benchmark library | command |",
           "|---|---|---|---|---|---|---|---|"]
    for run in runs:
        link = os.path.relpath(run.directory, doc_dir).replace(os.sep, "/")
        programs = ", ".join(p + (" (**partial**)" if p + ".json" in run.partial else "")
                             for p in run.programs)
        out.append(f"| [`{run.id}`]({link}/) | {run.card()} | {run.driver()} | {run.cuda()} | "
                   f"{run.when()} | {programs} | {run.context.get('library_build_type', '?')} | "
                   f"{cell(run.command_for(run.programs_json()))} |")
    notes = [f"- `{run.id}`: {' '.join(run.notes)}" for run in runs if run.notes]
    if any(run.partial for run in runs):
        notes.append("- **partial**: the program stopped before the end (a timeout); its JSON is "
                     "read up to the last benchmark written in full.")
    builds = sorted({run.context.get("library_build_type", "?") for run in runs} - {"release"})
    notes += [f"- {report.build_note(build)}" for build in builds]
    return "\n".join(out + ([""] + notes if notes else []))


def programs_table(runs):
    """Every benchmark program of benchmarks/ and the newest run that has its JSON."""
    out = ["| program | newest stored run |", "|---|---|"]
    for source in sorted(glob.glob(os.path.join(here, "*_bench.cu"))):
        program = os.path.basename(source)[:-len(".cu")]
        run = next((r for r in runs if program in r.programs), None)
        where = "**not measured**" if run is None else f"`{run.id}`" + (
            " (**partial**)" if program + ".json" in run.partial else "")
        out.append(f"| {program} | {where} |")
    return "\n".join(out)


def goals_table(chosen, runs):
    """Every goal of report.py, judged on the newest rows: met, missed or not measured."""
    origin = {b["run_name"]: run_id for run_id, entries in chosen.items() for b in entries}
    entries = [b for run in runs for b in chosen[run.id]]
    out = ["| goal | limit | status | measured (newest) | run |", "|---|---|---|---|---|"]
    for goal in report.goal_results(entries):
        results = goal["results"]
        if not results:
            status, measured, where = "not measured", "", ""
        else:
            status = "met" if all(met for _, _, met in results) else "**missed**"
            measured = "; ".join(f"`{name}` {value}" + ("" if met else " (missed)")
                                 for name, value, met in results)
            where = ", ".join(dict.fromkeys(f"`{origin[name]}`" for name, _, _ in results))
        out.append(f"| {goal['what']} | {goal['limit']} | {status} | {measured} | {where} |")
    return "\n".join(out)


def table_sections(runs, chosen):
    """report.py's tables, each from the newest run of every row, one block per run it draws on."""
    out = []
    for title, table in report.TABLES:
        blocks = []
        for run in runs:
            entries = chosen[run.id]
            body = table(entries)
            if not body:
                continue
            files = sorted({b["source"] for b in entries})
            sources = [s for s in files if table([b for b in entries if b["source"] == s])] or files
            blocks.append(f"From {run.describe(sources)}\n\n{body}")
        if blocks:
            out.append(f"### {title}\n\n" + "\n\n".join(blocks))
    return out


def charts(runs, chosen, doc_dir):
    """Writes the charts next to the doc (and removes those with nothing to draw); their links."""
    entries = [b for run in runs for b in chosen[run.id]]
    out = []
    for name, chart, alt in CHARTS:
        path = os.path.join(doc_dir, name)
        svg = chart(entries)
        if not svg:
            if os.path.exists(path):
                os.remove(path)
            continue
        with open(path, "w", newline="\n") as f:
            f.write(svg)
        sources = ", ".join(f"`{run.id}`" for run in runs if chart(chosen[run.id]))
        out.append(f"![{alt}]({name})\n\n({name}, from {sources})")
    return out


def generate(results, doc):
    runs = load_runs(results)
    chosen = latest(runs)
    doc_dir = os.path.dirname(os.path.abspath(doc))
    inside = os.path.abspath(results).startswith(ROOT + os.sep)
    shown = os.path.relpath(results, ROOT) if inside else results
    reading = f"(no reading yet: write it in {shown}/reading.md)"
    if os.path.exists(os.path.join(results, "reading.md")):
        with open(os.path.join(results, "reading.md")) as f:
            reading = f.read().strip()
    compile_run = next((run for run in runs if run.compile_cost), None)
    parts = [
        f"<!-- Generated by `python3 benchmarks/perf_doc.py` from {shown}/*/ (the stored benchmark "
        f"runs) and {shown}/reading.md. Do not edit by hand: store a run with `python3 "
        f"benchmarks/perf_doc.py --store OUT`, or edit the reading and run the script again. -->",
        "# Performance",
        f"All but the reading is generated from the Google Benchmark JSON of the runs stored in "
        f"`{shown}/`: each table row comes from the newest run that measured it, "
        "with that run's card, driver, date and command, and each goal of "
        "`benchmarks/report.py` is shown met, missed or not measured. To add a run, on a GPU "
        "machine:\n\n```sh\n"
        "scripts/bench.sh -o OUT -r 5                # every *_bench, BENCH_TIMEOUT s each\n"
        "python3 benchmarks/perf_doc.py --store OUT  # to docs/results/<date>-<card>/, regenerate\n"
        "```",
        "## Runs\n\n" + runs_table(runs, doc_dir),
        "## Programs\n\n" + programs_table(runs),
        "## Goals\n\n" + goals_table(chosen, runs),
    ]
    chart_links = charts(runs, chosen, doc_dir)
    if chart_links:
        parts.append("## Charts\n\n" + "\n\n".join(chart_links))
    parts.append("## Tables\n\n" + ("\n\n".join(table_sections(runs, chosen)) or "No stored run."))
    parts.append("### Compile cost\n\n" + (
        f"From {compile_run.describe()}\n\n{compile_run.compile_cost}" if compile_run else
        "Not measured in any stored run (no compile_cost.log); the history (linked below) "
        "has the hand-kept measurements."))
    parts.append("## Reading\n\n" + reading)
    parts.append("## Earlier runs\n\nThe hand-written record of the earlier runs, whose JSON was "
                 "not kept, is in [performance-history.md](performance-history.md).")
    with open(doc, "w", newline="\n") as f:
        f.write("\n\n".join(parts) + "\n")


def card_slug(directory, paths):
    """'h200' for one NVIDIA H200, 'h200x2' for two: from machine.txt, else the JSON's device."""
    names = [g.get("name", "") for g in read_machine(os.path.join(directory, "machine.txt"))]
    if not names:
        names = [report.read_json(paths[0])[0].get("context", {}).get("curt_device", "gpu")]
    slug = re.sub(r"[^a-z0-9]+", "-", names[0].lower().replace("nvidia", "")).strip("-") or "gpu"
    return slug + (f"x{len(names)}" if len(names) > 1 else "")


def store(out, run_id, results):
    """Copies scripts/bench.sh's OUT (the non-empty JSON and their logs, machine.txt,
    command.txt, compile_cost.log) into results/<run id>/; returns that directory."""
    paths = json_paths(out)
    if not paths:
        sys.exit(f"perf_doc.py: no non-empty *_bench.json in {out}")
    if run_id is None:
        date = report.read_json(paths[0])[0].get("context", {}).get("date", "")[:10] or "undated"
        base = f"{date}-{card_slug(out, paths)}"
        run_id, n = base, 1
        while os.path.exists(os.path.join(results, run_id)):  # a second run the same day
            n += 1
            run_id = f"{base}-{n}"
    target = os.path.join(results, run_id)
    if os.path.exists(target):
        sys.exit(f"perf_doc.py: {target} exists; choose another --run-id")
    os.makedirs(target)
    names = [os.path.basename(p) for p in paths]
    names += [n[:-len(".json")] + ".log" for n in names]
    names += ["machine.txt", "command.txt", "compile_cost.log"]
    for name in names:
        if os.path.exists(os.path.join(out, name)):
            shutil.copyfile(os.path.join(out, name), os.path.join(target, name))
    return target


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", metavar="OUT", help="a scripts/bench.sh output directory to keep")
    parser.add_argument("--run-id", help="its name under the results (default: date-card)")
    parser.add_argument("--results", default=os.path.join(ROOT, "docs", "results"))
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs", "performance.md"))
    args = parser.parse_args(argv)
    if args.run_id and not args.store:
        parser.error("--run-id goes with --store")
    if args.store:
        print(f"stored {store(args.store, args.run_id, args.results)}")
    generate(args.results, args.doc)
    print(f"wrote {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
