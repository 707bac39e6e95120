// The one table of recording options (issue #42): each row is one option of
// ptsnap::RecordingOptions as the C ABI's key (ptsnap_options_set) and, for
// most rows, `ptsnap run`/`attach`'s flag `--KEY` with its help text and
// magic-trace's single-dash spelling. The C ABI looks keys up here (its
// "unknown option" error lists them), the CLI registers its flags from it
// (cli/cmd_record.cpp), and the man page and bash completion follow from
// the CLI's --help (tools/gen-man, tools/gen-completion).
// option_table_test checks that every key is accepted by the C ABI, listed
// in include/ptsnap/ptsnap.h and docs/api.md, and spelled in `ptsnap run
// --help` (or attach's): adding a row without the rest fails there.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>

#include "ptsnap/decoder.h"
#include "ptsnap/recording.h"
#include "ptsnap/result.h"

namespace ptsnap::api {

// What a row's value is. kBool: "1"/"0", "true"/"false", "yes"/"no",
// "on"/"off", and on the CLI a flag without a value; kText: any other
// value, which the CLI's option takes as its argument.
enum class OptionValue { kBool, kText };

// How the CLI spells a row.
enum class CliForm {
  kFlag,  // `--KEY`, registered by the CLI from this row (value, help, default)
  kOwn,   // the CLI has its own flags for it, in another syntax: `cli` names them
  kNone,  // no CLI flag: `cli` says why
};

struct OptionSpec {
  std::string_view key;  // the C ABI's key; with CliForm::kFlag also the flag without "--"
  OptionValue value;
  // Sets the option in `o` from `text`, leaving `o` as it was on failure.
  // The error is what follows `option "KEY": ` in the C ABI's message (and
  // `--KEY: ` in the CLI's): `bad value "V" (accepted: ...)` or the parser's
  // own message.
  Result<void> (*set)(RecordingOptions& o, std::string_view text);
  CliForm cli;
  // kFlag: the help text `ptsnap run --help` prints. kOwn: the CLI's flags
  // for it, as --help spells them ("--trace-include-kernel"). kNone: why the
  // CLI has none.
  std::string_view help;
  // kFlag: the value the CLI shows as its default ("" for none).
  std::string_view cli_default = {};
  // kFlag: magic-trace's spellings of the flag ("-trigger"), rewritten to
  // `--KEY` before parsing.
  std::array<std::string_view, 2> magic_trace = {};
  // A value `set` accepts, for the tests.
  std::string_view example = "1";
};

// Every row, in the order `ptsnap run --help` lists the kFlag rows.
std::span<const OptionSpec> RecordingOptionTable();

// The row of `key`, nullptr if there is none.
const OptionSpec* FindRecordingOption(std::string_view key);

// The keys, comma separated, in the table's order: the C ABI's "known:"
// list.
std::string RecordingOptionKeys();

// The decode options (ptsnap_decoder_set): each key is `ptsnap decode`'s
// flag `--KEY` (cmd_decode.cpp registers those with the other decode-only
// flags), and option_table_test checks that decode's --help, ptsnap.h and
// docs/api.md spell every one.
struct DecodeOptionSpec {
  std::string_view key;
  // Sets the option in `o` from `text`, leaving `o` as it was on failure;
  // the error follows `option "KEY": ` in the C ABI's message.
  Result<void> (*set)(DecodeOptions& o, std::string_view text);
  std::string_view example;  // a value `set` accepts, for the tests
};
std::span<const DecodeOptionSpec> DecodeOptionTable();
const DecodeOptionSpec* FindDecodeOption(std::string_view key);
// The keys, comma separated: ptsnap_decoder_set's "known:" list.
std::string DecodeOptionKeys();

}  // namespace ptsnap::api
