#!/usr/bin/env bash
# fuzz/smoke.sh -- build every cargo-fuzz target and run each for a short
# budget; exits non-zero when a target crashes, a property fails, or a
# build fails. Prints the executions of each target.
#
# usage: fuzz/smoke.sh [seconds per target]      (default 20, or $FUZZ_SECONDS)
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). Uses the nightly toolchain
# when rustup has one; otherwise the stable toolchain with RUSTC_BOOTSTRAP=1
# (the sanitizer runtimes ship with stable too). New inputs go to a
# temporary directory, so the checked-in seed corpora in fuzz/corpus/ stay
# as they are; a crash leaves its input in fuzz/artifacts/<target>/.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
secs=${1:-${FUZZ_SECONDS:-20}}

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz smoke: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2
    exit 2
fi
toolchain=()
if cargo +nightly --version >/dev/null 2>&1; then
    toolchain=(+nightly)
    echo "fuzz smoke: $(cargo +nightly --version)" >&2
else
    export RUSTC_BOOTSTRAP=1
    echo "fuzz smoke: no nightly toolchain; $(cargo --version) with RUSTC_BOOTSTRAP=1" >&2
fi

mapfile -t targets < <(cargo "${toolchain[@]}" fuzz list)
echo "fuzz smoke: building ${#targets[@]} targets: ${targets[*]}" >&2
start=$(date +%s)
cargo "${toolchain[@]}" fuzz build
echo "fuzz smoke: built in $(( $(date +%s) - start )) s" >&2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
summary=()
for t in "${targets[@]}"; do
    mkdir -p "$work/$t" "corpus/$t"
    echo "fuzz smoke: $t for ${secs}s" >&2
    log="$work/$t.log"
    if ! cargo "${toolchain[@]}" fuzz run "$t" "$work/$t" "corpus/$t" -- \
        -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=4096 \
        >"$log" 2>&1; then
        tail -n 60 "$log" >&2
        echo "fuzz smoke: $t FAILED (input in fuzz/artifacts/$t/)" >&2
        exit 1
    fi
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n1)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | grep -o '[0-9]*')
    summary+=("$(printf '%-18s %10s execs %7s/s  cov %s' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}")")
done
echo "fuzz smoke: no crash in ${#targets[@]} targets, ${secs}s each"
printf '  %s\n' "${summary[@]}"
