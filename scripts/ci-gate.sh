#!/usr/bin/env bash
# ci-gate.sh: gate a change on lockbench, the way the example CI workflow
# does (examples/lockbench-ci.yml).
#
#   scripts/ci-gate.sh [-n RUNS] [-o OUT] [-B BASE_BENCH | -S BASE_SCENARIO | -b BASELINE_DIR] [-m MIN_RUNS] [-c "COMPARE FLAGS"] SCENARIO.yaml
#
# The candidate is ./bin/bench (or $BENCH). The baseline is either
#   -B BASE_BENCH   a bench binary built from the base commit: baseline and
#                   candidate runs are interleaved (base, candidate, base, ...)
#                   so that the machine's drift hits both sides alike;
#   -S BASE_SCENARIO the same bench on the base commit's scenario, which
#                   runs the base commit's lock client (your own driver):
#                   interleaved as with -B, each side run from its
#                   scenario's folder, so a driver command relative to it
#                   runs that side's code; or
#   -b BASELINE_DIR a stored folder of results folders (restored from a CI
#                   cache). When it holds no run yet, the candidate's runs
#                   become the baseline and the gate passes: there is
#                   nothing to compare with.
#
# Steps: N runs a side into OUT/baseline/run-i and OUT/candidate/run-i;
# each run's own exit code gates (safety 100, invalid 101, known answer
# 102, liveness 103, thresholds 99); then bench compare OUT/baseline
# OUT/candidate gates on significant regressions (99) and safety counts
# rising from zero (100), with at least MIN_RUNS (default N) a side. OUT is
# kept whatever happens (upload it as an artifact). The exit code is the
# worst one seen, ranked as bench ranks verdicts; 0 only if every step
# passed. No step's exit code is masked.
set -uo pipefail

usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; }

runs=5 out=results/ci base_bench="" base_scenario="" baseline="" min_runs="" compare_flags=""
while getopts "n:o:B:S:b:m:c:h" opt; do
  case $opt in
    n) runs=$OPTARG ;;
    o) out=$OPTARG ;;
    B) base_bench=$OPTARG ;;
    S) base_scenario=$OPTARG ;;
    b) baseline=$OPTARG ;;
    m) min_runs=$OPTARG ;;
    c) compare_flags=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 104 ;;
  esac
done
shift $((OPTIND - 1))
if [ $# -ne 1 ]; then usage >&2; echo "ci-gate: give one scenario file" >&2; exit 104; fi
scenario=$1
bench=${BENCH:-bin/bench}
min_runs=${min_runs:-$runs}
case $runs in ''|*[!0-9]*|0) echo "ci-gate: -n wants a positive number" >&2; exit 104 ;; esac
n_bases=0
for v in "$base_bench" "$base_scenario" "$baseline"; do [ -z "$v" ] || n_bases=$((n_bases + 1)); done
if [ "$n_bases" -gt 1 ]; then echo "ci-gate: -B, -S and -b exclude each other" >&2; exit 104; fi
for b in "$bench" ${base_bench:+"$base_bench"}; do
  [ -x "$b" ] || { echo "ci-gate: $b is not an executable bench (make build)" >&2; exit 104; }
done
"$bench" validate "$scenario" >/dev/null || exit $?
if [ -n "$base_scenario" ]; then "$bench" validate "$base_scenario" >/dev/null || exit $?; fi

# rank orders exit codes as bench orders verdicts: safety, invalid,
# liveness, known answer, threshold, anything else that is not 0.
rank() {
  case $1 in 0) echo 0 ;; 100) echo 9 ;; 101) echo 8 ;; 103) echo 7 ;; 102) echo 6 ;; 99) echo 5 ;; *) echo 4 ;; esac
}
worst=0
note() { # note CODE WHAT
  if [ "$1" -ne 0 ]; then echo "ci-gate: $2 exited $1" >&2; fi
  if [ "$(rank "$1")" -gt "$(rank "$worst")" ]; then worst=$1; fi
}

mkdir -p "$out"
rm -rf "$out/candidate"
mkdir -p "$out/candidate"
have_runs() { ls "$1"/*/summary.json >/dev/null 2>&1; }

# run_in_folder BENCH SCENARIO DIR: a run from the scenario's own folder
# (-S), so that the driver command it names is that side's code.
run_in_folder() {
  local b s d
  b=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
  d=$(mkdir -p "$3" && cd "$3" && pwd)
  s=$2
  (cd "$(dirname "$s")" && "$b" run -q -dir "$d" "$(basename "$s")")
}

if [ -n "$base_scenario" ]; then
  case $bench in */*) ;; *) bench=$(command -v "$bench") ;; esac
  rm -rf "$out/baseline"; mkdir -p "$out/baseline"
  for i in $(seq 1 "$runs"); do
    echo "== round $i/$runs: baseline ($base_scenario)"
    run_in_folder "$bench" "$base_scenario" "$out/baseline/run-$i"; code=$?
    [ $code -eq 0 ] || echo "ci-gate: warning: baseline run $i exited $code" >&2
    echo "== round $i/$runs: candidate ($scenario)"
    run_in_folder "$bench" "$scenario" "$out/candidate/run-$i"; code=$?
    note $code "candidate run $i"
  done
  baseline=$out/baseline
elif [ -n "$base_bench" ]; then
  rm -rf "$out/baseline"; mkdir -p "$out/baseline"
  for i in $(seq 1 "$runs"); do
    echo "== round $i/$runs: baseline"
    # The base's own verdicts are the base's business: reported, not
    # counted (bench compare refuses a baseline with invalid cases).
    "$base_bench" run -q -dir "$out/baseline/run-$i" "$scenario"; code=$?
    [ $code -eq 0 ] || echo "ci-gate: warning: baseline run $i exited $code" >&2
    echo "== round $i/$runs: candidate"
    "$bench" run -q -dir "$out/candidate/run-$i" "$scenario"; code=$?
    note $code "candidate run $i"
  done
  baseline=$out/baseline
else
  for i in $(seq 1 "$runs"); do
    echo "== run $i/$runs: candidate"
    "$bench" run -q -dir "$out/candidate/run-$i" "$scenario"; code=$?
    note $code "candidate run $i"
  done
  if [ -z "$baseline" ]; then baseline=$out/baseline; fi
  if ! have_runs "$baseline"; then
    if [ "$worst" -ne 0 ]; then
      echo "ci-gate: no baseline in $baseline, and the candidate's runs failed: not storing them as one" >&2
      exit "$worst"
    fi
    mkdir -p "$baseline"
    cp -r "$out/candidate/." "$baseline/"
    echo "ci-gate: no baseline in $baseline: stored these $runs run(s) as the baseline; nothing to compare yet"
    exit 0
  fi
fi

echo "== bench compare $baseline $out/candidate"
# shellcheck disable=SC2086 # compare_flags holds several flags on purpose
"$bench" compare -min-runs "$min_runs" $compare_flags "$baseline" "$out/candidate" | tee "$out/compare.txt"
note "${PIPESTATUS[0]}" "bench compare"
if [ "$worst" -eq 0 ]; then echo "ci-gate: passed ($runs run(s) a side)"; else echo "ci-gate: FAILED with exit $worst (results kept in $out)" >&2; fi
exit "$worst"
