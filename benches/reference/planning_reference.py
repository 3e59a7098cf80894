#!/usr/bin/env python3
"""A straightforward reference model of docs/planning-model.md on scipy/HiGHS.

Used to cross-check gpuplan's optimum on generated problems and as the speed
baseline of the planner issue (one variable per offer per hour, no reductions).
Handles the MIP/LP objective only: eligibility, caps, spot and pool shares.

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
sigma, pi = pol.get("max_spot_share"), pol.get("max_pool_share")
h = pol.get("spot_overhead_factor") or 0.0
int_res = pol.get("integer_reserved", True) and not relax
int_hr = pol.get("integer_hourly", False) and not relax
D = doc["demand"]
T = len(D)


def eligible(o):
    if pol.get("allowed_clouds") is not None and o["cloud"] not in pol["allowed_clouds"]:
        return False
    if pol.get("allowed_regions") is not None and o["region"] not in pol["allowed_regions"]:
        return False
    if pol.get("gpu_models") is not None and o["gpu_model"] not in pol["gpu_models"]:
        return False
    m = pol.get("min_gpu_memory_gib")
    return m is None or (o.get("gpu_memory_gib") is not None and o["gpu_memory_gib"] >= m)


offers = [o for o in doc["offers"] if eligible(o)]
cost, lo, hi, integ = [], [], [], []
R, S, O = {}, {}, {}


def var(c, upper, is_int):
    cost.append(c)
    lo.append(0.0)
    hi.append(np.inf if upper is None else upper)
    integ.append(1 if is_int else 0)
    return len(cost) - 1


for k, o in enumerate(offers):
    for j, r in enumerate(o.get("reserved") or []):
        eff = (r.get("hourly_price") or 0) + (r.get("upfront") or 0) / r["term_hours"]
        R[k, j] = var(T * eff, None, int_res)
    gamma = (1 - (o.get("spot_interruption_rate") or 0)) / (1 + h)
    for t in range(T):
        if o.get("spot_price") is not None and gamma > 0 and sigma != 0 and pi != 0:
            S[k, t] = var(o["spot_price"], o.get("max_spot_instances"), int_hr)
        if o.get("on_demand_price") is not None:
            O[k, t] = var(o["on_demand_price"], o.get("max_on_demand_instances"), int_hr)

rows, lb, ub = [], [], []


def row(coefs, lower, upper):
    rows.append(coefs)
    lb.append(lower)
    ub.append(upper)


for k, o in enumerate(offers):
    js = [R[k, j] for j in range(len(o.get("reserved") or []))]
    if o.get("max_reserved_instances") is not None and js:
        row({v: 1.0 for v in js}, -np.inf, o["max_reserved_instances"])
for t in range(T):
    cover, spot, pools = {}, {}, {}
    for k, o in enumerate(offers):
        g = o["gpus_per_instance"]
        gamma = (1 - (o.get("spot_interruption_rate") or 0)) / (1 + h)
        for j in range(len(o.get("reserved") or [])):
            cover[R[k, j]] = g
        if (k, t) in S:
            cover[S[k, t]] = gamma * g
            spot[S[k, t]] = gamma * g
            pool = o.get("spot_pool") or f"{o['cloud']}/{o['region']}/{o['instance_type']}"
            pools.setdefault(pool, {})[S[k, t]] = gamma * g
        if (k, t) in O:
            cover[O[k, t]] = g
    row(cover, D[t], np.inf)
    if sigma is not None and spot:
        row(spot, -np.inf, sigma * D[t])
    if pi is not None:
        for p in pools.values():
            row(p, -np.inf, pi * D[t])

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
