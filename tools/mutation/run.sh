#!/bin/bash
# Mutation testing of the sampler core (issue 17; needs the `mutation` extra: pip install -e ".[mutation]").
# Not part of CI (see docs/validation.md for the time each module takes).
#
#   bash tools/mutation/run.sh [CONFIG...]     # default: the six configs below, in this order
#   RESUME=1 bash tools/mutation/run.sh ...    # keep the scratch copy and its sessions, refresh
#                                              # tests/ and tools/, run what is still pending
#   MUTATION_TIMEOUT=60 ...                     # seconds before a mutant's tests count as hung (killed)
#   MUTATION_JIT=1 ...                          # keep numba's JIT on (configs that say they need it)
#   CONFIG@NAME                                # use session-NAME.sqlite (e.g. a recheck session
#                                              # made by recheck.py) instead of session-CONFIG
#
# Works in a scratch copy ($MUTATION_DIR, default /tmp/pmdp-mutation: HEAD plus the working tree's tests/, tools/, reference/),
# never in the checkout it is started from. numba's JIT is disabled (NUMBA_DISABLE_JIT=1): the
# kernels run as plain Python, so a mutant costs no recompilation and the tests stay fast.
# One session per config (/tmp/pmdp-mutation/session-NAME.sqlite); per config the report is
# printed and the survivors are written to /tmp/pmdp-mutation/survivors-NAME.txt.
# The results are also kept in the checkout, in tools/mutation/ledger/NAME.jsonl (every 5 minutes
# and at the end; commit it): a new session of the config is seeded from it (ledger.py), so a
# run continues on another machine and only mutants on changed lines run again.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -eq 0 ]; then
  set -- tools/mutation/interweave_kernel.toml tools/mutation/kernels.toml \
         tools/mutation/conjugate.toml tools/mutation/noncentred.toml \
         tools/mutation/steps.toml tools/mutation/mcem_objective.toml
fi
work=${MUTATION_DIR:-/tmp/pmdp-mutation}  # another folder runs a second run beside the first
sock=$work.sock
venv=${VENV:-$here/.venv}
if [ "${RESUME:-0}" = 1 ] && [ -d "$work" ]; then
  rm -rf "$work/tests" "$work/tools"
else
  rm -rf "$work" && mkdir -p "$work"
  git -C "$here" archive HEAD | tar -x -C "$work"
  mkdir "$work/.ledger-source" && cp -r "$work/pymc_unbounded_dp" "$work/.ledger-source/"  # ledger.py
fi
cp -r "$here/tests" "$here/tools" "$work/"
[ -d "$here/reference" ] && rm -rf "$work/reference" && cp -r "$here/reference" "$work/"  # the reference sampler (tests/conftest.py)
find "$work" -name __pycache__ -prune -exec rm -rf {} +
sed -i "s#/tmp/pmdp-mutation.sock#$sock#" "$work"/tools/mutation/*.toml  # this run's own server
cd "$work"
export PYTHONPATH="$work" PATH="$venv/bin:$PATH"
[ "${MUTATION_JIT:-0}" = 1 ] || export NUMBA_DISABLE_JIT=1
rm -f "$work/server.out" "$sock"  # a stale "ready" or socket must not start the run early
python tools/mutation/server.py "$work" "$sock" "$work/tests.log" "${MUTATION_TIMEOUT:-180}" > "$work/server.out" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
until grep -q ready "$work/server.out" 2>/dev/null; do sleep 1; done
for arg in "$@"; do
  config=${arg%@*}
  name=$(basename "$config" .toml)
  [ "$arg" != "$config" ] && name=${arg#*@}
  session=session-$name.sqlite
  ledger=$here/tools/mutation/ledger/${name%%-part*}.jsonl  # results kept in the checkout
  start=$(date +%s)
  if [ ! -f "$session" ]; then
    cosmic-ray init "$config" "$session"
    cr-filter-operators "$session" "$config"
    python tools/mutation/source_filter.py "$session" "$config"
    python tools/mutation/ledger.py seed "$session" "$config" "$ledger"
    cosmic-ray baseline "$config" || { echo "$name: baseline failed: the tests do not pass unmutated"; exit 1; }
  fi
  ( while sleep 300; do python tools/mutation/ledger.py export "$session" "$config" "$ledger" > /dev/null; done ) &
  exporter=$!
  cosmic-ray exec "$config" "$session"
  kill $exporter
  python tools/mutation/ledger.py export "$session" "$config" "$ledger"
  echo "$name: mutation run $(( $(date +%s) - start )) s"
  cr-report "$session" --show-pending | tail -n 4
  python tools/mutation/survivors.py "$session" > "survivors-$name.txt"
  echo "$name: survivors in $work/survivors-$name.txt"
done
