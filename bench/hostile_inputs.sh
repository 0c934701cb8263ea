#!/bin/sh
# The long run of the property tests of what reaches the master from outside (issue 40, "hostile
# input at every door"), in release mode with 100,000 cases a property (the test command runs
# 256): the worker protocol's frames (supervisor/tests/frame_properties.rs), and the job payload's
# fields, the settle rules and the run configuration the master reads (tests/properties.rs). A case that fails is printed shrunk by
# proptest; make it a test. Usage: bench/hostile_inputs.sh [cases]
set -eu
cd "$(dirname "$0")/.."
export DROVER_PROPTEST_CASES="${1:-100000}"
cargo test --release -p drover-supervisor --test frame_properties -- --test-threads 2
cargo test --release -p drover-cli --test properties -- --test-threads 2
