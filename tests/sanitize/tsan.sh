#!/usr/bin/env bash
# Runs the tests of gptkit's own threads under ThreadSanitizer (make tsan builds BUILD with
# TSAN=1): the unit tests built there, then the CLI tests of gpt-tokenize (its worker pool) and
# of gpt-train's asynchronous checkpoints and Gloo ranks (their gradient sums run on a thread of
# the comm during the backward: train_elastic) at one OpenMP thread each (libgomp is
# not instrumented: its threads would be reported as races). A data race or a lock-order
# inversion fails the test that hit it, with TSan's report in its log. Reports from inside
# libraries gptkit does not own are suppressed in tsan.supp, each with its reason.
# Usage: tests/sanitize/tsan.sh BUILD
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build-tsan}
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$top/tests/sanitize/tsan.supp ${TSAN_OPTIONS:-}"
export OMP_NUM_THREADS=1 GPT_TEST_SLOWDOWN=${GPT_TEST_SLOWDOWN:-2} # run.sh's hang guard, for TSan's slowdown
# (not tokenize_cases: 200 runs of a few bytes each, one block, nothing in parallel; an eighth of
# this run's time. Not tokenize_bounded: 120 MB of text for its memory bounds, a fifth of this
# run's time, through the same pool, streaming and --val-fraction spill that tokenize_batch,
# tokenize_threads and tokenize_split run here on small inputs. Not tokenize_learn and
# tokenize_learn_hf: they sample, train and export beside --learn, whose counting threads
# unit/test_tokenize_count runs here. make test and make check run them all.)
exec bash "$top/tests/run.sh" "$build" test_ tokenize -tokenize_cases -tokenize_bounded \
  -tokenize_learn -tokenize_learn_hf train_ckpt_fail train_kill9 train_elastic
