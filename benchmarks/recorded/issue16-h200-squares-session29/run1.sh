# hsq (session 29) device run 1: measure before changing. run: carry [".llvm22", ".dev/hsq"]
# command: bash .dev/hsq/run1.sh   (builds main's checkout, the tree `run` sends)
bash .llvm22/unpack.sh >/dev/null 2>&1
ROOT=$(pwd); H=$ROOT/.dev/hsq
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb -Ccmake.define.COOPJIT_WERROR=ON . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd $ROOT
timeout 100 python3 benchmarks/cuda_waves.py $H/spec1.json $OUT/waves1.json --rounds 4 --budget 60 2>&1 | tee $OUT/waves1.txt | grep -v "^    "
grep "^    " $OUT/waves1.txt | sort | uniq | head -20
echo "waves done $(( $(date +%s) - t0 )) s"
cd /tmp
timeout 40 python3 $H/probe.py $OUT/clocks1.md 2 2>&1 | tail -8
echo "clocks done $(( $(date +%s) - t0 )) s"
NCU="ncu --clock-control none --profile-from-start off --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section SourceCounters --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum,lts__t_sectors_srcunit_tex.sum"
timeout 120 $NCU -f -o $OUT/ncu1 python3 $H/ncu_one.py > $OUT/ncu1.log 2>&1; echo "ncu rc=$?"; tail -3 $OUT/ncu1.log
ncu --import $OUT/ncu1.ncu-rep --page details --csv > $OUT/ncu1_details.csv 2>&1
python3 - <<PY
import csv
rows = list(csv.reader(open("$OUT/ncu1_details.csv")))
h = rows[0]; ki = h.index("Kernel Name"); ii = h.index("ID"); si=h.index("Section Name"); mi=h.index("Metric Name"); ui=h.index("Metric Unit"); vi=h.index("Metric Value")
want = ("Duration","SM Frequency","DRAM Throughput","Memory Throughput","L2 Hit Rate","Compute (SM) Throughput","Registers Per Thread","Dynamic Shared Memory Per Block","Grid Size","Block Size","Cluster Size","Achieved Occupancy","Issue Slots Busy","dram__bytes_read.sum","dram__bytes_write.sum","lts__t_sector_hit_rate.pct","Warp Cycles Per Issued Instruction","Executed Ipc Active","L1/TEX Hit Rate","Mem Busy","Max Bandwidth","No Eligible")
last = None
for r in rows[1:]:
    if len(r) <= vi: continue
    if r[ii] != last:
        last = r[ii]; print("==", r[ii], r[ki][:110])
    if r[mi] in want or "Tensor" in r[mi] or "stall" in r[mi].lower():
        print("   ", r[mi], "=", r[vi], r[ui])
PY
ncu --import $OUT/ncu1.ncu-rep --page raw --csv --metrics regex:smsp__pcsamp_warps_issue_stalled_.*,regex:sm__pipe_tensor.*pct_of_peak_sustained_active,regex:sm__inst_executed_pipe_tensor.* > $OUT/ncu1_raw.csv 2>&1 || true
ncu --import $OUT/ncu1.ncu-rep --page source --csv --print-source sass > $OUT/ncu1_sass.csv 2>&1 || true
ls -la $OUT; echo "total $(( $(date +%s) - t0 )) s"
