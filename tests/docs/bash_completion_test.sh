#!/usr/bin/env bash
# The generated bash completion completes what ptsnap's --help lists.
#
# usage: bash_completion_test.sh COMPLETION    (PTSNAP_BIN names the binary)
#
# TAP output. Sources the completion and calls its function the way bash's
# programmable completion does (COMP_WORDS, COMP_CWORD, COMP_LINE,
# COMP_POINT), in a temporary directory holding one file and two
# directories, and compares COMPREPLY with what each case must offer.
set -u

completion=${1-}
if [[ -z $completion || -z ${PTSNAP_BIN-} ]]; then
  echo "Bail out! usage: PTSNAP_BIN=ptsnap $0 COMPLETION"
  exit 1
fi
completion=$(realpath -- "$completion") || exit 1  # the test runs in a temporary directory
# shellcheck source=/dev/null
source "$completion" || { echo "Bail out! sourcing $completion failed"; exit 1; }
spec=$(complete -p ptsnap 2>/dev/null) || { echo "Bail out! $completion registers no completion for ptsnap"; exit 1; }
func=$(sed -n 's/.* -F \([^ ]*\) .*/\1/p' <<<"$spec")
[[ -n $func ]] || { echo "Bail out! no -F function in: $spec"; exit 1; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
mkdir trace.ptsnap other.ptsnap
: > trace.fxt.gz

n=0 failed=0
# complete WORD... : COMPREPLY for the command line WORD... with the cursor
# at the end of the last word ('' for a new word).
complete_line() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMP_LINE="$*"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  "$func" ptsnap "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
  got=$(printf '%s\n' "${COMPREPLY[@]}" | sort -u | tr '\n' ' ')
  got=${got% }
}

report() {  # report OK DESCRIPTION
  n=$((n + 1))
  if [[ $1 == 0 ]]; then
    echo "ok $n - $2"
  else
    echo "not ok $n - $2"
    echo "# got: [$got]"
    failed=$((failed + 1))
  fi
}

# expect_exactly "W1 W2" WORD... : offers these words and nothing else.
expect_exactly() {
  local want
  want=$(tr ' ' '\n' <<<"$1" | sort -u | tr '\n' ' ')
  want=${want% }
  shift
  complete_line "$@"
  [[ $got == "$want" ]]
  report $? "'$*' offers exactly [$want]"
}

# expect_includes "W1 W2" WORD... : offers at least these words.
expect_includes() {
  local w ok=0
  local -a want
  read -r -a want <<<"$1"
  shift
  complete_line "$@"
  for w in "${want[@]}"; do
    [[ " $got " == *" $w "* ]] || ok=1
  done
  report $ok "'$*' offers [${want[*]}]"
}

# expect_excludes "W" WORD... : does not offer W.
expect_excludes() {
  local w=$1
  shift
  complete_line "$@"
  [[ " $got " != *" $w "* ]]
  report $? "'$*' does not offer $w"
}

# Subcommand names.
expect_exactly "run report replay" ptsnap r
expect_exactly "run attach info probe decode export report replay serve" ptsnap ''
expect_exactly "serve" ptsnap se
expect_exactly "report replay" ptsnap rep
expect_exactly "replay" ptsnap repl
expect_exactly "--tid" ptsnap replay --ti
expect_exactly "--sort" ptsnap report --so
expect_exactly "other.ptsnap trace.ptsnap" ptsnap report ''  # TRACE_DIR: directories only
expect_exactly "decode" ptsnap -v d
expect_includes "--help --version --verbose" ptsnap --

# Flags of a subcommand.
expect_exactly "--trigger --trace-dir --trace-include-kernel --trace-kernel-only" ptsnap run --tr
expect_exactly "--pid" ptsnap attach --pi
expect_excludes "--pid" ptsnap run --pi
expect_exactly "--force" ptsnap export --f

# Every flag each --help prints, and no other.
for sub in $("$PTSNAP_BIN" --help | sed -n '/^Subcommands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p'); do
  flags=$("$PTSNAP_BIN" "$sub" --help | sed -n '/^Options:/,/^$/s/^  \(-[^ ]*\).*/\1/p' | tr ',\n' '  ')
  expect_exactly "${flags% }" ptsnap "$sub" -
done

# Values.
expect_exactly "fxt json events" ptsnap decode --format ''
expect_exactly "json" ptsnap decode --format j
expect_exactly "fxt json events" ptsnap decode --format =      # --format=<TAB>: = breaks words
expect_exactly "events" ptsnap decode --format = e
expect_exactly "--format=json" ptsnap decode --format=j          # = not in COMP_WORDBREAKS
expect_exactly "low normal high custom:" ptsnap run --timer-resolution ''
expect_exactly "low normal high custom:" ptsnap attach --timer-resolution ''
expect_exactly "other.ptsnap trace.ptsnap" ptsnap decode ''     # TRACE_DIR: directories only
expect_exactly "trace.ptsnap" ptsnap info t
expect_exactly "other.ptsnap trace.ptsnap" ptsnap run --trace-dir ''
expect_exactly "other.ptsnap trace.ptsnap" ptsnap probe --root ''
expect_exactly "trace.fxt.gz trace.ptsnap" ptsnap run -o t       # a file
expect_exactly "trace.fxt.gz trace.ptsnap" ptsnap decode trace.ptsnap --output t
expect_includes "--output --format" ptsnap decode trace.ptsnap '' # TRACE_DIR given: flags
expect_includes "$$" ptsnap attach -p ''                           # pids
expect_includes "1,$$" ptsnap attach --pid 1,
expect_exactly "" ptsnap run --trigger ''                          # a symbol: nothing to offer

# After run's --: a command, then its arguments.
expect_includes "bash" ptsnap run -- bas
expect_includes "bash" ptsnap run --emulate -o x.fxt -- bas
expect_exactly "trace.fxt.gz trace.ptsnap" ptsnap run -- ls t
expect_excludes "--trigger" ptsnap run -- ls --tr

# bash accepts the completion as written.
bash -n "$completion"
report $? "$completion is valid bash"

echo "1..$n"
exit $((failed > 0))
