"""Summarise an ``ncu --csv`` metrics listing per kernel: launches, mean time, DRAM bytes.

    python bench/ncu_summary.py ncu.csv
"""

import csv
import sys
from collections import OrderedDict


def main(path: str) -> None:
    rows = OrderedDict()
    with open(path, newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]
    for r in csv.DictReader(lines):
        key = (r["ID"], r["Kernel Name"][:70])
        d = rows.setdefault(key, {})
        val = float(r["Metric Value"].replace(",", ""))
        unit = r["Metric Unit"]
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "byte": 1e-6, "Kbyte": 1e-3,
                 "Mbyte": 1.0, "Gbyte": 1e3}.get(unit, 1.0)
        d[r["Metric Name"]] = val * scale
    agg = OrderedDict()
    for (_, name), d in rows.items():
        a = agg.setdefault(name, [0, 0.0, 0.0])
        a[0] += 1
        a[1] += d.get("gpu__time_duration.sum", 0.0)
        a[2] += d.get("dram__bytes_read.sum", 0.0) + d.get("dram__bytes_write.sum", 0.0)
    print(f"{'kernel':70s} {'n':>3s} {'us/launch':>10s} {'MB/launch':>10s} {'GB/s':>8s}")
    for name, (n, us, mb) in agg.items():
        print(f"{name:70s} {n:3d} {us / n:10.1f} {mb / n:10.1f} {mb / us * 1e3:8.0f}")


if __name__ == "__main__":
    main(sys.argv[1])
