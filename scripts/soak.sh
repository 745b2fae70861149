#!/usr/bin/env bash
# The long runs of the randomized tests, for before a release or after an
# engine change: the model-based tests over many seeds (TestModel,
# TestModelOwnership, whose Ownership flips, TestModelOrdered, and
# TestModelConfigs, whose options, restarts and flips each seed draws,
# with Explain checked against the model) and the chaos test over
# several, under -race. Not part of scripts/test.sh (CI runs a fixed
# budget of seeds); a failure prints the seed and the command to replay it.
#
#   scripts/soak.sh            # 50 seeds of each model test (engine, engine with ownership flips, sources), then 5 minutes of chaos seeds
#   SEEDS=200 CHAOS_SOAK=30m scripts/soak.sh  # more
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-50}
CONVERGE_MODEL_SEEDS="$SEEDS" go test -race -count=1 -timeout 60m -run 'TestModel$' ./reconciler
CONVERGE_MODEL_SEEDS="$SEEDS" go test -race -count=1 -timeout 60m -run 'TestModelOwnership' ./reconciler
CONVERGE_MODEL_SEEDS="$SEEDS" go test -race -count=1 -timeout 60m -run 'TestModelOrdered|TestModelConfigs' ./reconciler
# The sources' model test (a store and a directory, restarts over a target
# that persists): the same number of seeds.
CONVERGE_SOURCE_MODEL_SEEDS="$SEEDS" go test -race -count=1 -timeout 60m -run 'TestModel' ./source
CONVERGE_SOAK="${CHAOS_SOAK:-5m}" go test -race -count=1 -timeout 60m -run 'TestChaos' ./reconciler
