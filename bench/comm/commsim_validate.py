#!/usr/bin/env python3
"""commsim's predictions against measured comm_bench runs (docs/COMMSIM.md).

  commsim_validate.py COMMSIM [--ref results_2core.txt] [RUN.txt ...]
                      [--hosts MULTIHOST.txt ...] [--per-host K] [--algo flat|hier|NAME]
                      [--model PRESET] [--set key=value ...] [--fit key,key,...]
                      [--min-bytes N] [--spread] [--median]

RUN.txt: comm_bench output (nccl-tests rows); repeated runs of one
configuration keep their best (smallest) time. --ref reads the dtensor column
of bench/comm/results_2core.txt. These rows are predicted for the algorithm
the dispatcher picks, all ranks on one host unless --per-host K says K ranks
per host. --hosts reads the table bench/comm/multihost_bench.sh prints
("# H hosts x K ranks" header; per-host K from it): its flat column is
predicted with commsim --algo ring, its hier column with --algo hier (the
algorithms the script forces with DT_ALGO). --algo forces one algorithm on
every row (flat = ring); --model picks commsim's preset (default local).
--spread compares the series (tables) of the --hosts files with each other
instead (how far the measurement repeats).
--median compares each row with the median over the RUN.txt files of the
times they hold for it (each file's best run): give several series of the
same configurations together (the measurement varies up to 1.5x between
series, so the median is a fairer target than any one series).
--fit adjusts the named model parameters (coordinate descent on a log scale)
to minimise the mean squared log error and prints the --set flags found.
Prints a markdown table and the largest error.
"""
import math
import re
import subprocess
import sys

# Broadcast is left out: its root returns as soon as its sends are out, so
# comm_bench's back-to-back iterations overlap and time no single broadcast.
COLLS = ("allreduce", "allgather", "reduce_scatter")


# a row: (ranks, ranks per host or None for one host, collective, bytes, forced algorithm or None)
OPTS = {"per_host": None, "algo": None, "model": None}


def read_runs(path, best):
    ranks = None
    for line in open(path):
        m = re.match(r"# dtensor/\S+ (\w+), (\d+) ranks", line)
        if m:
            ranks = int(m.group(2))
            continue
        f = line.split()
        if ranks and len(f) == 8 and f[7] in COLLS:
            key = (ranks, OPTS["per_host"], f[7], int(f[0]), OPTS["algo"])
            best[key] = min(best.get(key, 1e30), float(f[4]) * 1e-6)


def read_hosts(path, best, series=None):
    """multihost_bench.sh's table: flat (ring) and hier columns per row; each
    table of the file is one series, also kept apart in @series if given."""
    ranks = per_host = None
    for line in open(path):
        m = re.match(r"# (\d+) hosts x (\d+) ranks", line)
        if m:
            per_host = int(m.group(2))
            ranks = int(m.group(1)) * per_host
            if series is not None:
                series.append({})
            continue
        f = line.split()
        if ranks and len(f) >= 4 and f[0] in COLLS and f[1].isdigit():
            for col, algo in ((2, "ring"), (3, "hier")):
                if OPTS["algo"] not in (None, algo) or f[col] == "-":
                    continue
                key = (ranks, per_host, f[0], int(f[1]), algo)
                best[key] = min(best.get(key, 1e30), float(f[col]) * 1e-6)
                if series is not None:
                    series[-1][key] = float(f[col]) * 1e-6


def spread(series):
    """How far the measurement itself repeats: per pair of series, the rows
    whose times are within 25% of each other, and those further apart than
    1.25^2, which no single prediction can bring within 25% of both."""
    for i in range(len(series)):
        for j in range(i + 1, len(series)):
            a, b = series[i], series[j]
            r = [max(a[k], b[k]) / min(a[k], b[k]) for k in sorted(set(a) & set(b))]
            if r:
                print(f"series {i + 1} vs {j + 1}: {len(r)} rows, {sum(x <= 1.25 for x in r)} "
                      f"within 25%, {sum(x > 1.25 ** 2 for x in r)} over 1.56x apart, median "
                      f"ratio {sorted(r)[len(r) // 2]:.2f}, largest {max(r):.2f}")


# Times in results_2core.txt have one decimal (us): a row's true time lies
# within +-0.05 us of it.
REF_RESOLUTION = 0.05e-6
resolution = {}


def read_ref(path, best):
    ranks = None
    for line in open(path):
        m = re.match(r"### (\d+) ranks", line)
        if m:
            ranks = int(m.group(1))
            continue
        m = re.match(r"(\w+)\s+(\d+)\s+\S+\s+\(\s*([\d.]+)\)", line)
        if ranks and m and m.group(1) in COLLS:
            key = (ranks, OPTS["per_host"], m.group(1), int(m.group(2)), OPTS["algo"])
            best[key] = min(best.get(key, 1e30), float(m.group(3)) * 1e-6)
            resolution[key] = REF_RESOLUTION


def command(key, sets):
    ranks, per_host, coll, nbytes, algo = key
    cmd = ["--csv", "--ranks", str(ranks), "--per-host", str(per_host or ranks),
           "--collective", coll, "--bytes", str(nbytes)]
    if OPTS["model"]:
        cmd += ["--model", OPTS["model"]]
    if algo:
        cmd += ["--algo", algo]
    for s in sets:
        cmd += ["--set", s]
    return " ".join(cmd)


def pick(out, algo):
    """The dispatcher's row of one commsim answer, or the forced algorithm's."""
    for row in out.splitlines():
        f = row.split(",")
        if f[-1] == "*" or (algo and f[4] == algo):
            return f[4], float(f[5])
    return None, None


def predict_all(sim, keys, sets):
    """Every row's prediction from one commsim --batch run (a process per
    row spent ~0.1 s loading the library)."""
    lines = "".join(command(k, sets) + "\n" for k in keys)
    out = subprocess.run([sim, "--batch"], input=lines, capture_output=True, text=True,
                         check=True).stdout
    answers = re.split(r"^#end (\d+)\n", out, flags=re.M)
    preds = []
    for i, key in enumerate(keys):
        text, rc = answers[2 * i], answers[2 * i + 1]
        if rc != "0":
            sys.exit(f"commsim failed on: {command(key, sets)}")
        preds.append(pick(text, key[4]))
    return preds


def errors(sim, rows, sets):
    res = []
    keys = sorted(rows)
    for key, (algo, t) in zip(keys, predict_all(sim, keys, sets)):
        meas = rows[key]
        if t is not None:
            # against the nearest time the rounded measurement allows
            r = resolution.get(key, 0.0)
            near = min(max(t, meas - r), meas + r)
            res.append((key, algo, meas, t, t / meas - 1, t / near - 1))
    return res


def score(res):
    return sum(math.log(1 + r[4]) ** 2 for r in res) / len(res)


def preset(sim, names):
    """The starting values of @names: the preset's, as commsim prints them."""
    cmd = [sim, "--ranks", "2", "--bytes", "8"] + (["--model", OPTS["model"]] if OPTS["model"] else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("model: "))
    kv = dict(f.split("=") for f in line[len("model: "):].split())
    return {k: float(kv[k]) for k in names}


def fit(sim, rows, sets, names):
    vals = preset(sim, names)
    for s in sets:
        k, v = s.split("=")
        vals[k] = float(v)
    cur = lambda: [f"{k}={v:.6g}" for k, v in vals.items()]
    best = score(errors(sim, rows, cur()))
    for step in (2.0, 1.4, 1.15, 1.05):
        improved = True
        while improved:
            improved = False
            for k in names:
                for f in (step, 1 / step):
                    old = vals[k]
                    vals[k] = old * f
                    sc = score(errors(sim, rows, cur()))
                    if sc < best:
                        best, improved = sc, True
                    else:
                        vals[k] = old
        print(f"# step {step}: mean squared log error {best:.4f}", file=sys.stderr)
    return cur()


def main(argv):
    sim, rows, sets, names, min_bytes, series = argv[1], {}, [], [], 0, []
    per_file = []  # --median: each RUN.txt's rows apart
    i = 2
    while i < len(argv):
        a = argv[i]
        if a in ("--ref", "--hosts", "--set", "--fit", "--min-bytes", "--per-host", "--algo",
                 "--model"):
            v = argv[i + 1]
            i += 2
            if a == "--ref":
                read_ref(v, rows)
            elif a == "--hosts":
                read_hosts(v, rows, series)
            elif a == "--per-host":
                OPTS["per_host"] = int(v)
            elif a == "--algo":
                OPTS["algo"] = "ring" if v == "flat" else v
            elif a == "--model":
                OPTS["model"] = v
            elif a == "--set":
                sets.append(v)
            elif a == "--fit":
                names = v.split(",")
            else:
                min_bytes = int(v)
        elif a in ("--spread", "--median"):
            i += 1
        elif "--median" in argv:
            per_file.append({})
            read_runs(a, per_file[-1])
            i += 1
        else:
            read_runs(a, rows)
            i += 1
    for key in {k for f in per_file for k in f}:
        t = sorted(f[key] for f in per_file if key in f)
        rows[key] = (t[(len(t) - 1) // 2] + t[len(t) // 2]) / 2
    if "--spread" in argv:  # the --hosts series against each other, no predictions
        spread(series)
        return
    # a block of no float moves nothing (comm_bench times an empty call)
    rows = {k: v for k, v in rows.items() if k[3] // 4 >= k[0] and k[3] >= min_bytes}
    if names:
        sets = fit(sim, rows, sets, names)
        print("fitted: " + " ".join("--set " + s for s in sets))
    res = errors(sim, rows, sets)
    if not res:
        sys.exit("no measured rows to compare (empty or unfinished input?)")
    print("| ranks | per host | collective | bytes | algorithm | measured us | predicted us | error |")
    print("|---:|---:|---|---:|---|---:|---:|---:|")
    for (ranks, per_host, coll, nbytes, _), algo, meas, t, e, _ in res:
        print(f"| {ranks} | {per_host or ranks} | {coll} | {nbytes} | {algo} | {meas * 1e6:.1f} | "
              f"{t * 1e6:.1f} | {e * 100:+.0f}% |")
    worst = max(res, key=lambda r: abs(r[4]))
    within = sum(1 for r in res if abs(r[4]) <= 0.25)
    print(f"\n{len(res)} configurations, {within} within 25%, largest error {worst[4] * 100:+.0f}% "
          f"({worst[0][0]} ranks, {worst[0][2]}, {worst[0][3]} B, {worst[1]}); mean |error| "
          f"{sum(abs(r[4]) for r in res) / len(res) * 100:.0f}%, range "
          f"{min(r[4] for r in res) * 100:+.0f}% .. {max(r[4] for r in res) * 100:+.0f}%")

    groups = sorted({r[1] for r in res})
    if len(groups) > 1:  # per algorithm run
        for g in groups:
            sub = [r[4] for r in res if r[1] == g]
            print(f"  {g}: {len(sub)} rows, {sum(1 for e in sub if abs(e) <= 0.25)} within 25%, "
                  f"mean |error| {sum(abs(e) for e in sub) / len(sub) * 100:.0f}%, range "
                  f"{min(sub) * 100:+.0f}% .. {max(sub) * 100:+.0f}%")

    if resolution:
        within = sum(1 for r in res if abs(r[5]) <= 0.25)
        worst = max(res, key=lambda r: abs(r[5]))
        print(f"\nagainst the measurement's rounding interval (+-0.05 us): {within} within 25%, "
              f"largest error {worst[5] * 100:+.0f}%")

if __name__ == "__main__":
    main(sys.argv)
