#!/usr/bin/env python3
"""Generate a ghost.json with N vhosts x M routes (and optionally the same
routing table as a VCL if/elsif chain) for the VTC suite and the benchmark.

vhost i is "v<i>.example.com"; its route j matches
  j % 3 == 0: Exact "/e<j>"
  j % 3 == 1: PathPrefix "/p<j>"
  j % 3 == 2: PathPrefix "/h<j>" and header "x-route: <j>"
and sends to the backend given with --backend ADDR:PORT (--services and
--endpoints spread the routes over more backends with more endpoints).
"""
import argparse
import json


def routes(nv, nr):
    for i in range(nv):
        for j in range(nr):
            if j % 3 == 0:
                yield i, j, "Exact", "/e%d" % j, None
            elif j % 3 == 1:
                yield i, j, "PathPrefix", "/p%d" % j, None
            else:
                yield i, j, "PathPrefix", "/h%d" % j, str(j)


def endpoints(addr, port, n, k):
    """n endpoints for backend k: the given one first, then 10.x.y.z
    addresses (never connected: reloads create backends, nothing more)."""
    eps = [{"address": addr, "port": port}]
    for e in range(1, n):
        eps.append({"address": "10.%d.%d.%d" % (k // 250 % 250, k % 250,
                                                e % 250 + 1),
                    "port": port + e // 250})
    return eps


def ghost_json(nv, nr, addr, port, services=1, neps=1):
    """Route i*nr+j sends to backend (i*nr+j) % services, named
    "ns/svc<k>:80" ("ns/svc:80" with one service), of neps endpoints,
    each listed once in the backends table."""
    def name(k):
        return "ns/svc:80" if services == 1 else "ns/svc%d:80" % k
    vhosts = []
    for i in range(nv):
        vhosts.append({"hostname": "v%d.example.com" % i, "routes": []})
    for n, (i, j, t, p, h) in enumerate(routes(nv, nr)):
        m = {"path": {"type": t, "value": p}}
        if h is not None:
            m["headers"] = [{"type": "Exact", "name": "x-route", "value": h}]
        vhosts[i]["routes"].append({
            "name": "ns/v%d/r%d" % (i, j), "match": m,
            "backends": [{"backend": name(n % services)}]})
    backends = [{"name": name(k), "endpoints": endpoints(addr, port, neps, k)}
                for k in range(min(services, nv * nr))]
    return json.dumps({"version": 2, "backends": backends,
                       "vhosts": vhosts}, indent=1)


def cond(i, j, t, p, h, with_host):
    c = []
    if with_host:
        c.append('req.http.host == "v%d.example.com"' % i)
    if t == "Exact":
        c.append('req.url ~ "^%s(\\?|$)"' % p)
    else:
        c.append('req.url ~ "^%s(/|\\?|$)"' % p)
    if h is not None:
        c.append('req.http.x-route == "%s"' % h)
    return " && ".join(c)


def vcl_two_level(nv, nr, addr, port):
    """A chain over the hosts in vcl_recv, each calling a sub holding the
    chain of that vhost's routes: what a VCL generator would emit (a flat
    10,000-branch vcl_recv does not compile in bounded time)."""
    out = ["vcl 4.1;", "",
           'backend be { .host = "%s"; .port = "%d"; }' % (addr, port), ""]
    byhost = {}
    for r in routes(nv, nr):
        byhost.setdefault(r[0], []).append(r)
    for i in range(nv):
        out.append("sub vh%d {" % i)
        for k, (i_, j, t, p, h) in enumerate(byhost.get(i, [])):
            out.append("\t%sif (%s) {" % ("" if k == 0 else "} els",
                                            cond(i, j, t, p, h, False)))
            out.append("\t\tset req.backend_hint = be;")
            out.append("\t\treturn (pass);")
        if byhost.get(i):
            out.append("\t}")
        out.append("}")
    out.append("")
    out.append("sub vcl_recv {")
    for i in range(nv):
        out.append('\t%sif (req.http.host == "v%d.example.com") {' %
                   ("" if i == 0 else "} els", i))
        out.append("\t\tcall vh%d;" % i)
    out.append("\t}")
    out.append("\treturn (synth(404));")
    out.append("}")
    return "\n".join(out) + "\n"


def vcl_chain(nv, nr, addr, port):
    out = ["vcl 4.1;", "",
           'backend be { .host = "%s"; .port = "%d"; }' % (addr, port), "",
           "sub vcl_recv {"]
    first = True
    for i, j, t, p, h in routes(nv, nr):
        c = 'req.http.host == "v%d.example.com"' % i
        if t == "Exact":
            c += ' && req.url ~ "^%s(\\?|$)"' % p
        else:
            c += ' && req.url ~ "^%s(/|\\?|$)"' % p
        if h is not None:
            c += ' && req.http.x-route == "%s"' % h
        out.append("\t%sif (%s) {" % ("" if first else "} els", c))
        out.append("\t\tset req.backend_hint = be;")
        out.append("\t\treturn (pass);")
        first = False
    out.append("\t}")
    out.append("\treturn (synth(404));")
    out.append("}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--vhosts", type=int, default=1000)
    ap.add_argument("--routes", type=int, default=10, help="per vhost")
    ap.add_argument("--backend", default="127.0.0.1:8080")
    ap.add_argument("--services", type=int, default=1,
                    help="distinct backends, routes spread over them")
    ap.add_argument("--endpoints", type=int, default=1,
                    help="endpoints per backend")
    ap.add_argument("--vcl", action="store_true",
                    help="emit the VCL if/elsif chain (two levels) instead")
    ap.add_argument("--vcl-flat", action="store_true",
                    help="emit one flat if/elsif chain in vcl_recv")
    a = ap.parse_args()
    addr, port = a.backend.rsplit(":", 1)
    if a.vcl:
        print(vcl_two_level(a.vhosts, a.routes, addr, int(port)), end="")
    elif a.vcl_flat:
        print(vcl_chain(a.vhosts, a.routes, addr, int(port)), end="")
    else:
        print(ghost_json(a.vhosts, a.routes, addr, int(port), a.services,
                         a.endpoints))
