"""Medians over alternating processes of benchmarks/reduce_probe_s28.py's output (blocks headed
`## main ...` with coopjit alone and `## branch ...` with coopjit, NumPy and torch), one row a case:
the copy rate, main's and the branch's GB/s, the branch's % of copy, the peers and the ratios.
Session 28.

    python3 benchmarks/reduce_probe_summary_s28.py OUTPUT.txt
"""
import re, sys, statistics, collections
txt=open(sys.argv[1]).read().split("## ")
data=collections.defaultdict(lambda: collections.defaultdict(list))  # case -> col -> list
copies=collections.defaultdict(list); loads=[]
for blk in txt[1:]:
    head=blk.splitlines()[0]; who=head.split()[0]
    for line in blk.splitlines()[1:]:
        m=re.match(r'\s*(\S+) copy\s+([\d.]+) \| (.*) \| load ([\d.]+)',line)
        if not m: continue
        case,copy,cells,load=m.groups(); copies[case].append(float(copy)); loads.append(float(load))
        vals=re.findall(r'([\d.]+)\s+\d+%|n/a',cells)
        toks=re.findall(r'(n/a|[\d.]+\s+\d+%)',cells)
        names=["coopjit"] if who=="main" else ["coopjit","numpy","torch"]
        for n,t in zip(names,toks):
            if t!="n/a": data[case][f"{who}:{n}" if n=="coopjit" else n].append(float(t.split()[0]))
print(f"# medians over processes; load {min(loads):.1f}-{max(loads):.1f}")
print(f"{'case':>32} {'copy':>5} {'main':>6} {'branch':>6} {'%copy':>5} {'numpy':>6} {'torch':>6} {'b/main':>6} {'b/np':>5} {'b/torch':>7}")
below=0
for case in data:
    d=data[case]; med=lambda k: statistics.median(d[k]) if d.get(k) else float('nan')
    c=statistics.median(copies[case]); mn,br,np_,to=med("main:coopjit"),med("branch:coopjit"),med("numpy"),med("torch")
    pct=100*br/c
    flag=" <90" if pct<90 else ""
    beh=" behind" if (br<0.95*np_ or br<0.95*to) else ""
    below+= pct<90
    print(f"{case:>32} {c:5.1f} {mn:6.1f} {br:6.1f} {pct:4.0f}% {np_:6.1f} {to:6.1f} {br/mn:6.2f} {br/np_:5.2f} {br/to:7.2f}{flag}{beh}")
print("rows below 90% of copy:", below, "of", len(data))
