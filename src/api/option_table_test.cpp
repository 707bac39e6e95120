// The option table (api/option_table.h) against everything made from it or
// written beside it: every key is accepted by the C ABI, listed in
// include/ptsnap/ptsnap.h and in docs/api.md's key list, and spelled in
// `ptsnap run --help` (attach's for attach's own flags), so a key added in
// one place and not the others fails here. PTSNAP_BIN names the binary,
// PTSNAP_SOURCE_DIR the source tree (src/cli/meson.build).
#include "api/option_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "base/string_util.h"
#include "ptsnap/ptsnap.h"
#include "tests/support/run_ptsnap.h"

namespace ptsnap::api {
namespace {

using ::testing::HasSubstr;

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(PTSNAP_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(in.good()) << relative << " not found under " << PTSNAP_SOURCE_DIR;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// docs/api.md's key list: the "- **Options**" item, up to the next item.
std::string DocsKeyList() {
  const std::string md = ReadSource("docs/api.md");
  const size_t begin = md.find("- **Options**");
  EXPECT_NE(begin, std::string::npos) << "docs/api.md has no \"- **Options**\" item";
  if (begin == std::string::npos) return "";
  const size_t end = md.find("\n- **", begin + 1);
  return md.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// The line of `help` that lists `flag`: "  --trigger TEXT   Snapshot ...".
std::string HelpLine(const std::string& help, const std::string& flag) {
  for (std::string_view line : base::Split(help, '\n')) {
    const std::string_view names = base::Trim(line.substr(0, line.find("  ", 2)));
    for (std::string_view name : base::Split(names.substr(0, names.find(' ')), ','))
      if (name == flag) {
        // CLI11 puts the help on the next line when the names fill the column.
        const size_t next = help.find('\n', line.data() - help.data());
        if (next != std::string::npos && help.compare(next + 1, 10, std::string(10, ' ')) == 0)
          return std::string(line) + help.substr(next, help.find('\n', next + 1) - next);
        return std::string(line);
      }
  }
  return "";
}

struct Options {
  Options() : p(ptsnap_options_new()) {}
  ~Options() { ptsnap_options_free(p); }
  ptsnap_options* p;
};

TEST(OptionTable, KeysAreUniqueAndEveryRowIsComplete) {
  std::set<std::string_view> keys;
  for (const OptionSpec& row : RecordingOptionTable()) {
    EXPECT_TRUE(keys.insert(row.key).second) << row.key << " is in the table twice";
    EXPECT_NE(row.set, nullptr) << row.key;
    EXPECT_FALSE(row.help.empty()) << row.key << ": help, the CLI's flags or why it has none";
    EXPECT_EQ(FindRecordingOption(row.key), &row);
    for (std::string_view mt : row.magic_trace)
      if (!mt.empty()) {
        EXPECT_TRUE(mt.size() > 1 && mt[0] == '-' && mt[1] != '-') << row.key << ": " << mt;
      }
  }
  EXPECT_EQ(FindRecordingOption("snapshot-sise"), nullptr);
}

TEST(OptionTable, EveryKeyIsAcceptedByTheCApi) {
  for (const OptionSpec& row : RecordingOptionTable()) {
    Options o;
    EXPECT_EQ(
        ptsnap_options_set(o.p, std::string(row.key).c_str(), std::string(row.example).c_str()),
        PTSNAP_OK)
        << row.key << " " << row.example << ": " << ptsnap_last_error();
    if (row.value != OptionValue::kBool) continue;
    EXPECT_EQ(ptsnap_options_set(o.p, std::string(row.key).c_str(), "0"), PTSNAP_OK) << row.key;
    EXPECT_EQ(ptsnap_options_set(o.p, std::string(row.key).c_str(), "maybe"),
              PTSNAP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ptsnap_last_error(), "option \"" + std::string(row.key) +
                                       "\": bad value \"maybe\" (accepted: 1, 0, true, false, "
                                       "yes, no)");
  }
}

TEST(OptionTable, TheCApisUnknownKeyErrorListsEveryKey) {
  Options o;
  EXPECT_EQ(ptsnap_options_set(o.p, "snapshot-sise", "4M"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ptsnap_last_error(),
            "unknown option \"snapshot-sise\" (known: " + RecordingOptionKeys() + ")");
  for (const OptionSpec& row : RecordingOptionTable())
    EXPECT_THAT(RecordingOptionKeys(), HasSubstr(std::string(row.key)));
}

TEST(OptionTable, EveryKeyIsInPtsnapHAndDocsApi) {
  const std::string header = ReadSource("include/ptsnap/ptsnap.h");
  const std::string docs = DocsKeyList();
  for (const OptionSpec& row : RecordingOptionTable()) {
    EXPECT_NE(header.find("\"" + std::string(row.key) + "\""), std::string::npos)
        << row.key << " is missing from include/ptsnap/ptsnap.h's list of keys";
    EXPECT_NE(docs.find("`" + std::string(row.key) + "`"), std::string::npos)
        << row.key << " is missing from docs/api.md's list of keys (\"- **Options**\")";
  }
}

TEST(OptionTable, EveryKeyIsSpelledInTheCliHelp) {
  const testing::PtsnapRun run = testing::RunPtsnap("run --help", {.stdout_only = true});
  const testing::PtsnapRun attach = testing::RunPtsnap("attach --help", {.stdout_only = true});
  ASSERT_EQ(run.rc, 0) << run.out;
  ASSERT_EQ(attach.rc, 0) << attach.out;
  for (const OptionSpec& row : RecordingOptionTable()) {
    switch (row.cli) {
      case CliForm::kFlag: {
        // Both commands, with the row's own help text.
        const std::string flag = "--" + std::string(row.key);
        EXPECT_THAT(HelpLine(run.out, flag), HasSubstr(std::string(row.help))) << flag;
        EXPECT_THAT(HelpLine(attach.out, flag), HasSubstr(std::string(row.help))) << flag;
        if (!row.cli_default.empty()) {
          EXPECT_THAT(HelpLine(run.out, flag), HasSubstr("=" + std::string(row.cli_default)))
              << flag;
        }
        break;
      }
      case CliForm::kOwn:
        for (std::string_view names : base::Split(row.help, ','))
          for (std::string_view flag : base::Split(base::Trim(names), ' ')) {
            if (flag.empty()) continue;
            EXPECT_TRUE(!HelpLine(run.out, std::string(flag)).empty() ||
                        !HelpLine(attach.out, std::string(flag)).empty())
                << row.key << ": " << flag << " is in neither run's nor attach's --help";
          }
        break;
      case CliForm::kNone: break;  // the row says why (KeysAreUniqueAndEveryRowIsComplete)
    }
  }
}

// The other way round: a flag of run's or attach's --help is a row of the
// table (kFlag's --KEY, or a kOwn row's flags) or one of the CLI's own,
// which shape the decode after recording (ptsnap_decoder_set's keys) or
// name its output; a new recording flag must be given a row.
TEST(OptionTable, EveryRecordingFlagOfTheCliIsARow) {
  std::set<std::string> rows = {"-h",
                                "--help",
                                "-o",
                                "--output",
                                "--format",
                                "--decoder",
                                "--debug-dir",
                                "--max-depth",
                                "--min-duration",
                                "--no-inline",
                                "--split-snapshots",
                                "-j",
                                "--jobs",
                                "--no-decode"};
  for (const OptionSpec& row : RecordingOptionTable()) {
    if (row.cli == CliForm::kFlag) rows.insert("--" + std::string(row.key));
    if (row.cli != CliForm::kOwn) continue;
    for (std::string_view names : base::Split(row.help, ','))
      rows.insert(std::string(base::Trim(names)));
  }
  for (const char* command : {"run --help", "attach --help"}) {
    const testing::PtsnapRun help = testing::RunPtsnap(command, {.stdout_only = true});
    ASSERT_EQ(help.rc, 0) << help.out;
    size_t flags = 0;
    for (std::string_view line : base::Split(help.out, '\n')) {
      if (!base::StartsWith(line, "  -")) continue;
      const std::string_view names = base::Trim(line.substr(0, line.find(' ', 2)));
      for (std::string_view flag : base::Split(names, ',')) {
        ++flags;
        EXPECT_TRUE(rows.count(std::string(flag)))
            << command << ": " << flag
            << " is neither a row of src/api/option_table.cpp nor one of the CLI's own flags";
      }
    }
    EXPECT_GT(flags, 30u) << command << ": too few flags read from --help";
  }
}

// The decode options (ptsnap_decoder_set): unique, each setter takes its
// example, and each key is `ptsnap decode --KEY`, in ptsnap.h's list and in
// docs/api.md's ptsnap_decoder_set lines.
TEST(OptionTable, EveryDecodeKeyIsSetAndSpelledEverywhere) {
  const testing::PtsnapRun help = testing::RunPtsnap("decode --help", {.stdout_only = true});
  ASSERT_EQ(help.rc, 0) << help.out;
  const std::string header = ReadSource("include/ptsnap/ptsnap.h");
  const std::string md = ReadSource("docs/api.md");
  std::string docs;
  for (std::string_view line : base::Split(md, '\n'))
    if (line.find("ptsnap_decoder_set(") != std::string_view::npos) docs += std::string(line);
  std::set<std::string_view> keys;
  for (const DecodeOptionSpec& row : DecodeOptionTable()) {
    EXPECT_TRUE(keys.insert(row.key).second) << row.key << " is in the table twice";
    EXPECT_EQ(FindDecodeOption(row.key), &row);
    DecodeOptions o;
    EXPECT_TRUE(row.set(o, row.example)) << row.key << " " << row.example;
    EXPECT_FALSE(row.set(o, "")) << row.key << ": an empty value";
    EXPECT_FALSE(HelpLine(help.out, "--" + std::string(row.key)).empty())
        << "--" << row.key << " is not in `ptsnap decode --help`";
    EXPECT_NE(header.find("\"" + std::string(row.key) + "\""), std::string::npos)
        << row.key << " is missing from ptsnap.h's ptsnap_decoder_set comment";
    EXPECT_NE(docs.find(std::string(row.key)), std::string::npos)
        << row.key << " is missing from docs/api.md's ptsnap_decoder_set lines";
  }
  EXPECT_EQ(DecodeOptionKeys(), "decoder, max-depth, min-duration, no-inline, debug-dir");
  EXPECT_EQ(FindDecodeOption("engine"), nullptr);
}

}  // namespace
}  // namespace ptsnap::api
