#!/usr/bin/env python3
"""A straightforward reference model of docs/planning-model.md on scipy/HiGHS.

Used to cross-check gpuplan's optimum on generated problems and as the speed
baseline of the planner benchmarks: one variable per offer per hour (per class
in schema version 2), no reductions, no decomposition.
Handles the MIP/LP objective only: eligibility, caps, spot and pool shares,
and for version 2 classes with perf factors, owned capacity and hourly spot
prices (V1-V5, integer per-offer totals with continuous class parts).
Version 3 is the extensive form: one copy of the hourly model per scenario
(explicit, or made by its own implementation of the seeded generator),
shared reservations, and the Rockafellar-Uryasev rows, solved once per
frontier lambda (lambda = 1 in two steps: least CVaR, then least mean).

    pip install scipy numpy
    python3 benches/reference/planning_reference.py problem.json [--relax]
Prints: objective, solve seconds, total seconds (and the frontier for v3).
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


M64 = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def unit(self):
        return (self.next() >> 11) * 2.0 ** -53

    def below(self, n):
        return ((self.next() >> 11) * n) >> 53


def chain_path(rng, c, hours):
    pu, pd = c["p_up"], c["p_down"]
    out, up = [], True
    for t in range(hours):
        u = rng.unit()
        if t == 0:
            init = c.get("initial") or "stationary"
            up = init == "up" if init != "stationary" else (True if pu + pd == 0 else u < pu / (pu + pd))
        elif up:
            up = not (u < pd)
        else:
            up = u < pu
        out.append(up)
    return out


def conformal(scores, level):
    n = len(scores)
    k = max(1, math.ceil((n + 1) * level - 1e-9))
    return scores[k - 1] if k <= n else None


def empirical(scores, level):
    n = len(scores)
    return scores[min(n, max(1, math.ceil(n * level - 1e-9))) - 1]


def pool_of(o):
    return o.get("spot_pool") or f"{o['cloud']}/{o['region']}/{o['instance_type']}"


def scenarios_of():
    """[(id, probability, demand per class, {pool: [available per hour]})]."""
    base = [cl["demand"] for cl in classes]
    ids = [cl["id"] for cl in classes]
    if doc.get("scenarios"):
        given = doc["scenarios"]
        probs = [s.get("probability") for s in given]
        if all(p is None for p in probs):
            probs = [1.0 / len(given)] * len(given)
        else:
            total = sum(probs)
            probs = [p / total for p in probs]
        out = []
        for s, p in zip(given, probs):
            d = [list(x) for x in base]
            if "demand" in s:
                d[0] = s["demand"]
            for cid, v in (s.get("classes") or {}).items():
                d[ids.index(cid)] = v
            avail = {q: (a if isinstance(a, list) else [a] * T) for q, a in (s.get("spot_available") or {}).items()}
            out.append((s["id"], p, d, avail))
        return out
    g = doc.get("scenario_generator")
    if not g:
        return [("nominal", 1.0, base, {})]
    rng = SplitMix64(g["seed"])
    dem = g.get("demand")
    scaled = []
    if dem:
        level, b_hours = dem.get("level", 0.8), dem.get("bucket_hours")
        for cid, E in dem["residuals"].items():
            H = len(E[0])
            width = b_hours or H
            kappa = []
            for gi in range((H + width - 1) // width):
                sc = sorted(abs(E[i][h]) for i in range(len(E)) for h in range(gi * width, min(H, (gi + 1) * width)))
                q, m = conformal(sc, level), empirical(sc, level)
                kappa.append(q / m if m > 0 else 1.0)
            scaled.append((ids.index(cid), E, H, width, kappa))
    spot = g.get("spot") or {}
    out = []
    for n in range(g["count"]):
        d = [list(x) for x in base]
        if dem:
            B = dem.get("block_hours", 24)
            K = len(next(iter(dem["residuals"].values())))
            folds = [rng.below(K) for _ in range((T + B - 1) // B)]
            for c, E, H, width, kappa in scaled:
                d[c] = [max(0.0, base[c][t] + kappa[(t % H) // width] * E[folds[t // B]][t % H]) for t in range(T)]
        shocks = [(s["pools"], chain_path(rng, s, T)) for s in spot.get("shocks") or []]
        avail = {c["pool"]: chain_path(rng, c, T) for c in spot.get("pools") or []}
        for pools, path in shocks:
            for q in pools:
                own = avail.setdefault(q, [True] * T)
                avail[q] = [a and u for a, u in zip(own, path)]
        out.append((f"s{n}", 1.0 / g["count"], d, {q: [1 if a else 0 for a in v] for q, v in avail.items()}))
    return out


class Model:
    def __init__(self):
        self.cost, self.lo, self.hi, self.integ = [], [], [], []
        self.rows, self.lb, self.ub = [], [], []

    def var(self, c, upper, is_int, lower=0.0):
        self.cost.append(c)
        self.lo.append(lower)
        self.hi.append(np.inf if upper is None else upper)
        self.integ.append(1 if is_int else 0)
        return len(self.cost) - 1

    def row(self, coefs, lower, upper):
        self.rows.append(coefs)
        self.lb.append(lower)
        self.ub.append(upper)

    def solve(self, objective):
        A = lil_matrix((len(self.rows), len(self.cost)))
        for i, coefs in enumerate(self.rows):
            for v, c in coefs.items():
                A[i, v] += c
        res = milp(
            c=np.array(objective),
            constraints=LinearConstraint(A.tocsr(), self.lb, self.ub),
            bounds=Bounds(self.lo, self.hi),
            integrality=np.array(self.integ),
            options={"mip_rel_gap": 1e-7, "presolve": True},
        )
        return res


share = lambda c, key: c[key] if key in c else pol.get(key)


def reserved_vars(m, purchases=True):
    """The new-purchase columns: {(k, j): var}, and their cost coefficients."""
    R = {}
    for k, o in enumerate(offers):
        js = []
        for j, r in enumerate(o.get("reserved") or []):
            eff = (r.get("hourly_price") or 0) + (r.get("upfront") or 0) / r["term_hours"]
            R[k, j] = m.var(T * eff, None if purchases else 0.0, int_res)
            js.append(R[k, j])
        if o.get("max_reserved_instances") is not None and js:
            m.row({v: 1.0 for v in js}, -np.inf, o["max_reserved_instances"])
    return R


def hourly(m, R, demand, avail, spot_ok=True):
    """One scenario's hourly model (V1-V5); returns its cost {var: coef}."""
    cost_terms = {}
    for t in range(T):
        cover = [dict() for _ in classes]
        spot = [dict() for _ in classes]
        pools = [dict() for _ in classes]
        for k, o in enumerate(offers):
            g = o["gpus_per_instance"]
            gamma = (1 - (o.get("spot_interruption_rate") or 0)) / (1 + h)
            W = sum(n for n, H in owned.get(o["id"], []) if t < H)
            Rk = [R[k, j] for j in range(len(o.get("reserved") or []))]
            if Rk or W > 0:
                split = {}
                for c, cl in enumerate(classes):
                    if phi[k][c] is not None:
                        y = m.var(0.0, None, False)
                        split[y] = 1.0
                        cover[c][y] = phi[k][c] * g
                for v in Rk:
                    split[v] = -1.0
                m.row(split, -np.inf, W)
            pool = pool_of(o)
            up = avail.get(pool, [1] * T)[t] if spot_ok else 0
            for kind, price, cap in (("spot", spot_at(o, t) if up else None, o.get("max_spot_instances")),
                                     ("od", o.get("on_demand_price"), o.get("max_on_demand_instances"))):
                if price is None or (kind == "spot" and gamma <= 0):
                    continue
                total = m.var(0.0, cap, int_hr)
                cost_terms[total] = price
                parts = {total: -1.0}
                for c, cl in enumerate(classes):
                    if phi[k][c] is None:
                        continue
                    if kind == "spot" and (share(cl, "max_spot_share") == 0 or share(cl, "max_pool_share") == 0):
                        continue
                    p = m.var(0.0, None, False)
                    parts[p] = 1.0
                    if kind == "spot":
                        u = phi[k][c] * gamma * g
                        cover[c][p] = u
                        spot[c][p] = u
                        pools[c].setdefault(pool, {})[p] = u
                    else:
                        cover[c][p] = phi[k][c] * g
                m.row(parts, 0.0, 0.0)
        for c, cl in enumerate(classes):
            d = demand[c][t]
            m.row(cover[c], d, np.inf)
            sigma, pi = share(cl, "max_spot_share"), share(cl, "max_pool_share")
            if sigma is not None and spot[c]:
                m.row(spot[c], -np.inf, sigma * d)
            if pi is not None:
                for p in pools[c].values():
                    m.row(p, -np.inf, pi * d)
    return cost_terms


def baseline(demand):
    m = Model()
    R = reserved_vars(m, purchases=False)
    terms = hourly(m, R, demand, {}, spot_ok=False)
    res = m.solve([terms.get(i, 0.0) for i in range(len(m.cost))])
    return res.fun if res.status == 0 else None


scen = scenarios_of()
risk = doc.get("risk") or {}
lam = risk.get("lambda", 0.0)
beta = risk.get("beta", 0.95)
shortfall = risk.get("measure") == "savings_shortfall"
frontier = sorted(set(risk.get("frontier", [0, 0.25, 0.5, 0.75, 1])) | {lam}) if doc.get("schema_version") == 3 else [0.0]

m = Model()
R = reserved_vars(m)
r_cost = {v: m.cost[v] for v in R.values()}
costs = []
for _, p, demand, avail in scen:
    terms = dict(r_cost)
    terms.update(hourly(m, R, demand, avail))
    costs.append(terms)
shift = [baseline(d) if shortfall else 0.0 for _, _, d, _ in scen]
eta = m.var(0.0, None, False, lower=-np.inf)
us = [m.var(0.0, None, False) for _ in scen]
for (_, p, _, _), terms, u, b in zip(scen, costs, us, shift):
    coefs = {u: 1.0, eta: 1.0}
    for v, c in terms.items():
        coefs[v] = coefs.get(v, 0.0) - c
    m.row(coefs, -b, np.inf)


def objective(lam, mean_only=False):
    obj = [0.0] * len(m.cost)
    w = 1.0 if mean_only else 1.0 - lam
    for (_, p, _, _), terms in zip(scen, costs):
        for v, c in terms.items():
            obj[v] += w * p * c if v not in r_cost else 0.0
    for v, c in r_cost.items():
        obj[v] += w * c
    if not mean_only:
        obj[eta] += lam
        for (_, p, _, _), u in zip(scen, us):
            obj[u] += lam * p / (1 - beta)
    return obj


solve_start = time.time()
points = []
status = 0
for lam_i in frontier:
    res = m.solve(objective(lam_i))
    status = res.status
    if res.status != 0:
        break
    if lam_i == 1.0:
        v = res.fun
        cvar_row = {eta: 1.0}
        for (_, p, _, _), u in zip(scen, us):
            cvar_row[u] = p / (1 - beta)
        m.row(cvar_row, -np.inf, v + 1e-9 * max(1.0, abs(v)))
        res2 = m.solve(objective(1.0, mean_only=True))
        m.rows.pop(), m.lb.pop(), m.ub.pop()
        res = res2 if res2.status == 0 else res
    x = res.x
    scen_costs = [sum(c * x[v] for v, c in terms.items()) for terms in costs]
    losses = sorted(zip([c - b for c, b in zip(scen_costs, shift)], [s[1] for s in scen]))
    cum, q = 0.0, losses[-1][0]
    for val, p in losses:
        cum += p
        if cum >= beta - 1e-9:
            q = val
            break
    cvar = q + sum(p * max(0.0, val - q) for val, p in losses) / (1 - beta)
    mean = sum(val * p for val, p in losses)
    points.append({"lambda": lam_i, "objective": (1 - lam_i) * mean + lam_i * cvar})
solve = time.time() - solve_start
primary = next((pt["objective"] for pt in points if pt["lambda"] == lam), None)
out = {"status": status, "objective": primary, "solve_s": solve, "total_s": time.time() - start}
if doc.get("schema_version") == 3:
    out["frontier"] = points
    out["scenarios"] = [{"id": i, "probability": p, "demand": d, "spot_available": a} for i, p, d, a in scen] if "--scenarios" in sys.argv else None
print(json.dumps(out))
