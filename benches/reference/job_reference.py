#!/usr/bin/env python3
"""A straightforward reference model of jobs (docs/planning-model.md §11) on
scipy/HiGHS, for the planner benchmark's version 4 cases.

A bag is solved in the per-hour form: an hourly count per offer and hour
(continuous, within the hour's cap), a whole total per offer, a binary per
window and per hour ("something runs in hour h or later"), lexicographically:
the least total, then the earliest finish within 1e-9 of it (objective cost),
or the earliest finish, then the least total by it (objective time). A gang
enumerates every (offer, nodes) option in closed form.

    pip install scipy numpy
    python3 benches/reference/job_reference.py job.json
Prints: status, objective, total_usd, finish_hours, solve seconds, total seconds.
"""
import json
import math
import sys
import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_matrix

start = time.time()
doc = json.load(open(sys.argv[1]))
H = doc["hours"]
job = doc["job"]
W = job["work"]
c = job.get("checkpoint_hours") or 1.0
r = job.get("restart_hours")
r = 0.25 if r is None else r
perf = doc["perf"]
carbon = doc.get("carbon") or {}
price_t = (carbon.get("usd_per_tonne") or 0.0) / 1000.0
max_kg = carbon.get("max_kg")
budget = job.get("budget_usd")
objective = doc.get("objective") or "cost"


def factor(o):
    f = o.get("gpu_form_factor")
    if f and f"{o['gpu_model']}/{f}" in perf:
        return perf[f"{o['gpu_model']}/{f}"]
    return perf.get(o["gpu_model"])


def yld(o, n):
    if o["kind"] != "spot":
        return 1.0
    return 1.0 - n * (o.get("interruptions_per_hour") or 0.0) * (c / 2 + r)


def eligible(o):
    m = job.get("min_gpu_memory_gib")
    if m is not None and o["gpu_memory_gib"] < m:
        return False
    if any(n not in (o.get("capabilities") or []) for n in job.get("needs") or []):
        return False
    if factor(o) is None or (doc.get("carbon") and o.get("kgco2e_per_hour") is None):
        return False
    if yld(o, 1) <= 0:
        return False
    return not (o["kind"] == "window" and o["window"]["start_hour"] >= H)


offers = [o for o in doc["offers"] if eligible(o)]


def cap(o, h):
    if o["kind"] == "window":
        w = o["window"]
        return w["instances"] if w["start_hour"] <= h < min(w["start_hour"] + w["hours"], H) else 0
    caps = [o.get("max_instances")]
    if o.get("available"):
        caps.append(o["available"][h])
    caps = [x for x in caps if x is not None]
    return min(caps) if caps else None


def solve_bag():
    n_off = len(offers)
    # Columns: y[k][h] (n_off*H), N[k] (n_off), z[k] (n_off, fixed 0 unless a window), a[h] (H).
    Y = lambda k, h: k * H + h
    N = lambda k: n_off * H + k
    Z = lambda k: n_off * H + n_off + k
    A = lambda h: n_off * H + 2 * n_off + h
    ncol = n_off * H + 2 * n_off + H
    lb, ub, integ = np.zeros(ncol), np.full(ncol, np.inf), np.zeros(ncol)
    rows, lo, hi = [], [], []
    money, kg, total, work = np.zeros(ncol), np.zeros(ncol), np.zeros(ncol), np.zeros(ncol)
    for k, o in enumerate(offers):
        w = o["gpu_count"] * factor(o) * yld(o, 1)
        big = math.ceil(W / w) + 1
        p = o.get("usd_per_hour") or 0.0
        g = o.get("kgco2e_per_hour") or 0.0
        integ[N(k)] = 1
        work[N(k)], money[N(k)], kg[N(k)], total[N(k)] = w, p, g, p + price_t * g
        integ[Z(k)] = 1
        ub[Z(k)] = 1 if o["kind"] == "window" else 0
        if o["kind"] == "window":
            money[Z(k)] = total[Z(k)] = o["window"]["upfront_usd"]
        spread = {N(k): -1.0}
        for h in range(H):
            cp = cap(o, h)
            m = big if cp is None else cp
            ub[Y(k, h)] = m
            spread[Y(k, h)] = 1.0
            rows.append({Y(k, h): 1.0, A(h): -m}), lo.append(-np.inf), hi.append(0.0)
            if o["kind"] == "window":
                rows.append({Y(k, h): 1.0, Z(k): -m}), lo.append(-np.inf), hi.append(0.0)
        rows.append(spread), lo.append(0.0), hi.append(0.0)
    for h in range(H):
        integ[A(h)], ub[A(h)] = 1, 1
        if h + 1 < H:
            rows.append({A(h): 1.0, A(h + 1): -1.0}), lo.append(0.0), hi.append(np.inf)

    def scaled(vec, low, high):
        rhs = high if np.isfinite(high) else low
        s = 1e6 / abs(rhs) if rhs else 1.0
        return {i: v * s for i, v in enumerate(vec) if v}, low * s, high * s

    for vec, low, high in [(work, W * (1 - 1e-9), np.inf)] + \
            ([(money, -np.inf, budget * (1 + 1e-9) + 1e-9)] if budget is not None else []) + \
            ([(kg, -np.inf, max_kg * (1 + 1e-9) + 1e-9)] if max_kg is not None else []):
        row, l, u = scaled(vec, low, high)
        rows.append(row), lo.append(l), hi.append(u)

    def run(cost, extra=()):
        rs, ls, hs = list(rows), list(lo), list(hi)
        for row, l, u in extra:
            rs.append(row), ls.append(l), hs.append(u)
        mat = lil_matrix((len(rs), ncol))
        for i, row in enumerate(rs):
            for j, v in row.items():
                mat[i, j] = v
        res = milp(cost, constraints=LinearConstraint(mat.tocsr(), ls, hs), integrality=integ,
                   bounds=Bounds(lb, ub), options={"mip_rel_gap": 1e-9})
        return res if res.status == 0 else None

    finish = np.zeros(ncol)
    for h in range(H):
        finish[A(h)] = 1.0
    if objective == "cost":
        best = run(total)
        if best is None:
            return "infeasible", None, None, None
        cstar = float(total @ best.x)
        row, l, u = scaled(total, -np.inf, cstar + 1e-9 * max(1.0, abs(cstar)))
        lex = run(finish, [(row, l, u)])
        f = round(float(finish @ lex.x)) if lex is not None else None
        return "optimal", cstar, cstar, f
    fast = run(finish)
    if fast is None:
        return "infeasible", None, None, None
    f = round(float(finish @ fast.x))
    cheap = run(total, [({A(h): 1.0 for h in range(H)}, -np.inf, f + 0.5)])
    t = float(total @ cheap.x)
    return "optimal", float(f), t, f


def solve_gang():
    s = job.get("scaling") or 1.0
    G = job.get("gpus")
    best = None
    for i, o in enumerate(offers):
        for n in range(1, job["nodes_max"] + 1):
            if G is not None and abs(n * o["gpu_count"] - G) > 1e-9 * max(1.0, G):
                continue
            limit = o["window"]["instances"] if o["kind"] == "window" else o.get("max_instances")
            if limit is not None and n > limit:
                continue
            y = yld(o, n)
            if y <= 0:
                continue
            R = n * o["gpu_count"] * factor(o) * s ** math.log2(n) * y
            T = W / R
            if o["kind"] == "window":
                w = o["window"]
                t0, end, cost = w["start_hour"], min(w["start_hour"] + w["hours"], H), w["upfront_usd"]
            else:
                t0, end, cost = 0.0, H, n * o["usd_per_hour"] * T
            if t0 + T > end + 1e-9 * max(1.0, end):
                continue
            av = o.get("available")
            if av and any(a is not None and a < n for a in av[:min(H, math.ceil(T - 1e-9))]):
                continue
            if budget is not None and cost > budget * (1 + 1e-9) + 1e-9:
                continue
            kgs = n * (o.get("kgco2e_per_hour") or 0.0) * T
            if max_kg is not None and kgs > max_kg * (1 + 1e-9) + 1e-9:
                continue
            tot = cost + price_t * kgs
            key = (tot, T) if objective == "cost" else (t0 + T, tot)
            if best is None or key < best[0]:
                best = (key, tot, t0 + T)
    if best is None:
        return "infeasible", None, None, None
    return "optimal", best[0][0], best[1], best[2]


solve_start = time.time()
status, obj, tot, fin = solve_gang() if job["shape"] == "gang" else solve_bag()
print(json.dumps({"status": status, "objective": obj, "total_usd": tot, "finish_hours": fin,
                  "solve_s": time.time() - solve_start, "total_s": time.time() - start}))
