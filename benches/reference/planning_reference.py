#!/usr/bin/env python3
"""A straightforward reference model of docs/planning-model.md on scipy/HiGHS.

Used to cross-check gpuplan's optimum on generated problems and as the speed
baseline of the planner benchmarks: one variable per offer per hour (per class
in schema version 2), no reductions, no decomposition.
Handles the MIP/LP objective only: eligibility, caps, spot and pool shares,
and for version 2 classes with perf factors, owned capacity and hourly spot
prices (§10.5: V1-V5, integer per-offer totals with continuous class parts).

    pip install scipy numpy
    python3 benches/reference/planning_reference.py problem.json [--relax]
Prints: objective, solve seconds, total seconds.
"""
import json
import sys
import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_matrix

start = time.time()
doc = json.load(open(sys.argv[1]))
relax = "--relax" in sys.argv
pol = doc.get("policy") or {}
h = pol.get("spot_overhead_factor") or 0.0
int_res = pol.get("integer_reserved", True) and not relax
int_hr = pol.get("integer_hourly", False) and not relax
if "classes" in doc:
    classes = doc["classes"]
else:
    classes = [{"id": "default", "demand": doc["demand"]}]
T = len(classes[0]["demand"])


def passes(o, f):
    if f.get("allowed_clouds") is not None and o["cloud"] not in f["allowed_clouds"]:
        return False
    if f.get("allowed_regions") is not None and o["region"] not in f["allowed_regions"]:
        return False
    if f.get("gpu_models") is not None and o["gpu_model"] not in f["gpu_models"]:
        return False
    m = f.get("min_gpu_memory_gib")
    return m is None or (o.get("gpu_memory_gib") is not None and o["gpu_memory_gib"] >= m)


def factor(o, c):
    if not passes(o, c):
        return None
    perf = c.get("perf")
    return 1.0 if perf is None else perf.get(o["gpu_model"])


def spot_at(o, t):
    s = o.get("spot_price")
    return s[t] if isinstance(s, list) else s


offers = [o for o in doc["offers"] if passes(o, pol)]
phi = [[factor(o, c) for c in classes] for o in offers]
offers, phi = zip(*[(o, f) for o, f in zip(offers, phi) if any(x is not None for x in f)]) if offers else ((), ())
owned = {}
for e in doc.get("owned") or []:
    owned.setdefault(e["offer"], []).append((e["count"], T if e.get("remaining_hours") is None else min(T, e["remaining_hours"])))

cost, lo, hi, integ = [], [], [], []
rows, lb, ub = [], [], []


def var(c, upper, is_int):
    cost.append(c)
    lo.append(0.0)
    hi.append(np.inf if upper is None else upper)
    integ.append(1 if is_int else 0)
    return len(cost) - 1


def row(coefs, lower, upper):
    rows.append(coefs)
    lb.append(lower)
    ub.append(upper)


R = {}
for k, o in enumerate(offers):
    js = []
    for j, r in enumerate(o.get("reserved") or []):
        eff = (r.get("hourly_price") or 0) + (r.get("upfront") or 0) / r["term_hours"]
        R[k, j] = var(T * eff, None, int_res)
        js.append(R[k, j])
    if o.get("max_reserved_instances") is not None and js:
        row({v: 1.0 for v in js}, -np.inf, o["max_reserved_instances"])

share = lambda c, key: c[key] if key in c else pol.get(key)
for t in range(T):
    cover = [dict() for _ in classes]
    spot = [dict() for _ in classes]
    pools = [dict() for _ in classes]
    for k, o in enumerate(offers):
        g = o["gpus_per_instance"]
        gamma = (1 - (o.get("spot_interruption_rate") or 0)) / (1 + h)
        W = sum(n for n, H in owned.get(o["id"], []) if t < H)
        Rk = [R[k, j] for j in range(len(o.get("reserved") or []))]
        # V2: reserved split within new plus owned capacity.
        if Rk or W > 0:
            split = {}
            for c, cl in enumerate(classes):
                if phi[k][c] is not None:
                    y = var(0.0, None, False)
                    split[y] = 1.0
                    cover[c][y] = phi[k][c] * g
            for v in Rk:
                split[v] = -1.0
            row(split, -np.inf, W)
        for kind, price, cap in (("spot", spot_at(o, t), o.get("max_spot_instances")),
                                 ("od", o.get("on_demand_price"), o.get("max_on_demand_instances"))):
            if price is None or (kind == "spot" and gamma <= 0):
                continue
            total = var(price, cap, int_hr)
            parts = {total: -1.0}
            for c, cl in enumerate(classes):
                if phi[k][c] is None:
                    continue
                if kind == "spot" and (share(cl, "max_spot_share") == 0 or share(cl, "max_pool_share") == 0):
                    continue
                p = var(0.0, None, False)
                parts[p] = 1.0
                if kind == "spot":
                    u = phi[k][c] * gamma * g
                    cover[c][p] = u
                    spot[c][p] = u
                    pool = o.get("spot_pool") or f"{o['cloud']}/{o['region']}/{o['instance_type']}"
                    pools[c].setdefault(pool, {})[p] = u
                else:
                    cover[c][p] = phi[k][c] * g
            row(parts, 0.0, 0.0)
    for c, cl in enumerate(classes):
        d = cl["demand"][t]
        row(cover[c], d, np.inf)
        sigma, pi = share(cl, "max_spot_share"), share(cl, "max_pool_share")
        if sigma is not None and spot[c]:
            row(spot[c], -np.inf, sigma * d)
        if pi is not None:
            for p in pools[c].values():
                row(p, -np.inf, pi * d)

A = lil_matrix((len(rows), len(cost)))
for i, coefs in enumerate(rows):
    for v, c in coefs.items():
        A[i, v] = c
solve_start = time.time()
res = milp(
    c=np.array(cost),
    constraints=LinearConstraint(A.tocsr(), lb, ub),
    bounds=Bounds(lo, hi),
    integrality=np.array(integ),
    options={"mip_rel_gap": 1e-7, "presolve": True},
)
solve = time.time() - solve_start
print(json.dumps({"status": res.status, "objective": res.fun, "solve_s": solve, "total_s": time.time() - start}))
