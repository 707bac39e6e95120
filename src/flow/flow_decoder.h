// ptsnap's own Intel PT flow decoder: the stream of one logical CPU (or one
// thread) turned into the blocks and events libipt 2.0's block decoder
// (pt_blk_*) yields for it, configured as ptsnap configures libipt
// (decode/libipt.h MakePtConfig: end_on_call, end_on_jump, tick events),
// in the same order and with the same fields: the flow decoder is a drop-in
// source for what src/decode's StreamDecoder consumes, several times faster.
//
// What "the same" means (the contract the differential tests check,
// flow_diff_test.cpp and flow_diff_fuzzer.cpp, against libipt_oracle.h):
// both decoders are driven by the same loop (the one StreamDecoder runs:
// sync forward; drain pending events; next block; on an error, report it
// and sync forward from the decoder's position), and yield one Item per
//   - successful sync: its PSB's stream offset;
//   - non-empty block: ip, end_ip, ninsn, mode, speculative and the class of
//     its last instruction (libipt may leave that class at kError, "not
//     provided", for blocks from its block cache; then any class matches);
//   - event: its type, ip_suppressed, status_update, the payload fields of
//     the types below, has_tsc and tsc (libipt's time estimate, including
//     MTC and CYC: timing.h);
//   - error: the libipt error code (negative), where the loop reports one,
//     and for -pte_nomap the unread address (Item, kError).
// and, on every item, the time pt_blk_time reports right after the call
// that produced it (Item::now: what StreamDecoder's Now() reads there).
// Two runs are equal when their Item sequences are equal up to and including
// the first error, and the next sync offset after it is the same.
//
// Handled as libipt handles them: PSB+ (TSC, TMA, CBR, MODE, FUP, MTC, CYC,
// PAD, PIP, VMCS, MNT), TNT-8/TNT-64, TIP with return compression through a
// 64-entry return stack, TIP.PGE/PGD (also FUP+TIP.PGD: async disable),
// FUP+TIP (async branch), MODE.Exec/MODE.TSX, OVF (with and without a
// FUP), CBR, TraceStop, tick events, PSB sync and resync at the next PSB
// after an error; PIP and VMCS (a paging / VMCS event bound to the next
// MOV CR3, VMPTRLD, VMLAUNCH/VMRESUME or far branch, an async one bound to
// an async branch's TIP, a status update in PSB+), PTW (bound to the next
// PTWRITE, or to its FUP's IP), EXSTOP, MWAIT (bound to their FUP), PWRE,
// PWRX and MNT; and libipt 2.0's workarounds for the errata of every CPU
// it knows (see Errata below). What is not decoded yields kErrUnsupported
// there (and resyncs), so it never yields something libipt would not:
// libipt's BDM64 workaround (Broadwell), and a straight-line run of 65536
// instructions or more from libipt's block cache (which splits it where
// its entries' counts overflow a block).
// Only 64-bit code. Not modelled: instructions that cross a region
// boundary of the code reader, and libipt's uncached path's block split
// after 1024 instructions on the first pass through straight-line code.
//
// Code comes from a CodeReader (the caller's memory image). Blocks are
// decoded once per address with Zydis into a cache, with their successors
// chained; InvalidateCode() drops the cache when the image changes.
// Not thread-safe; one decoder per stream.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "flow/timing.h"

namespace ptsnap::flow {

// libipt's error codes, negated (pt_error_code), for the ones we produce.
inline constexpr int kErrInternal = -1;
inline constexpr int kErrNoSync = -3;
inline constexpr int kErrBadContext = -6;
inline constexpr int kErrEosCode = -7;
inline constexpr int kErrBadQuery = -8;
inline constexpr int kErrNoMem = -9;
inline constexpr int kErrNoIp = -11;
inline constexpr int kErrNoMap = -13;
inline constexpr int kErrBadInsn = -14;
inline constexpr int kErrRetstackEmpty = -20;
inline constexpr int kErrBadRetcomp = -21;
inline constexpr int kErrBadStatusUpdate = -22;
inline constexpr int kErrNoEnable = -23;
inline constexpr int kErrEventIgnored = -24;
inline constexpr int kErrOverflow = -25;
// Ours: a case the flow decoder recognises but does not decode (above).
inline constexpr int kErrUnsupported = -100;

// As libipt's pt_insn_class.
enum class InsnClass : uint8_t {
  kError,
  kOther,
  kCall,
  kReturn,
  kJump,
  kCondJump,
  kFarCall,
  kFarReturn,
  kFarJump,
  kPtwrite,
};

// As libipt's pt_event_type.
enum class EventType : uint8_t {
  kEnabled,
  kDisabled,
  kAsyncDisabled,
  kAsyncBranch,
  kPaging,
  kAsyncPaging,
  kOverflow,
  kExecMode,
  kTsx,
  kStop,
  kVmcs,
  kAsyncVmcs,
  kExstop,
  kMwait,
  kPwre,
  kPwrx,
  kPtwrite,
  kTick,
  kCbr,
  kMnt,
};

// As libipt's pt_exec_mode.
enum class ExecMode : uint8_t { kUnknown, k16, k32, k64 };

enum class ItemKind : uint8_t { kSync, kBlock, kEvent, kError, kNextIp };

// One unit of output. Fields by kind:
//   kSync:  offset (of the PSB).
//   kBlock: ip, end_ip, ninsn, mode, iclass, speculative; size (the last
//     instruction's length: where a not-taken branch falls through; not compared).
//   kEvent: event, ip_suppressed, status_update, has_tsc, tsc, offset (the
//     decoder's position, as pt_blk_get_offset there; not compared) and
//     kEnabled: ip, resumed; kDisabled: ip; kAsyncDisabled: ip (at), to (ip);
//     kAsyncBranch: ip (from), to; kOverflow: ip; kExecMode: ip, mode;
//     kTsx: ip, speculative, aborted; kTick: ip; kCbr: ratio;
//     kPaging: payload (CR3), non_root; kAsyncPaging: ip, payload (CR3),
//     non_root; kVmcs: payload (VMCS base); kAsyncVmcs: ip, payload (base);
//     kPtwrite: ip, payload, size (its bytes); kExstop: ip; kMwait: ip,
//     payload (hints | ext << 32); kPwre: payload (state | sub_state << 8 |
//     hw << 16); kPwrx: payload (last | deepest << 8 | interrupt << 16 |
//     store << 17 | autonomous << 18); kMnt: payload.
//   kError: error (negative code), offset (decoder position) and, for
//     kErrNoMap from a call that decoded no instruction, ip: the block's
//     start (libipt's pt_block.ip), the address whose code could not be
//     read (a branch target, where tracing resumed); else 0.
//   kNextIp (the oracle runs' last item, libipt_oracle.h; never from
//     Decode): ip, where decoding goes on after the trace ended
//     (FlowDecoder::NextIp), now: 0.
// Every kind: has_now, now: libipt's pt_blk_time right after the call that
// produced the item (its query layer reads ahead, so this can be later than
// an event's own tsc); has_now false where pt_blk_time says -pte_no_time.
// A block followed by an error item shares the error's call, and its now.
// perf's emulated-PTWRITE signature (perf-intel-pt.txt, "Emulated
// PTWRITE"; include/ptsnap/mark.h): a `ud2` and "perf,ptwrite  ", which a
// two-byte `jmp .+16` (eb 10) jumps over. Both engines find the function
// by it (the flow decoder's block cache, decode/libipt_marks.h).
inline constexpr std::string_view kEmulatedPtwriteMagic{"\x0f\x0bperf,ptwrite  ", 16};

struct Item {
  ItemKind kind = ItemKind::kBlock;
  EventType event = EventType::kEnabled;
  InsnClass iclass = InsnClass::kError;
  ExecMode mode = ExecMode::kUnknown;
  bool speculative = false, aborted = false, resumed = false;
  bool ip_suppressed = false, status_update = false, has_tsc = false;
  bool has_now = false, non_root = false;
  // A block whose last branch took the 64th bit of an emulated PTWRITE's
  // payload (perf-intel-pt.txt, "Emulated PTWRITE"): the payload is in
  // `payload`. Not part of the contract with libipt below (which has no
  // such thing); ptsnap's marks.
  bool mark = false;
  // A block that ends in the `jmp` over an emulated PTWRITE's signature:
  // the block at the function's entry (ptsnap's and perf's shapes begin so).
  // The decode hides the function's frame (docs/decoding.md, "Marks").
  bool eptw_jump = false;
  uint16_t ninsn = 0;
  uint8_t ratio = 0, size = 0;
  int error = 0;
  uint64_t ip = 0, end_ip = 0, to = 0, payload = 0;
  uint64_t tsc = 0;
  uint64_t offset = 0;
  uint64_t now = 0;
};
bool operator==(const Item& a, const Item& b);  // the contract above (iclass kError matches any)

// The caller's code: Read copies up to `size` bytes at `ip` into `buf` and
// returns how many it could (0: nothing mapped there). Called once per new
// block (and on slow paths), never for bytes the cache already holds.
class CodeReader {
 public:
  virtual ~CodeReader() = default;
  virtual size_t Read(uint64_t ip, uint8_t* buf, size_t size) = 0;
  // Where libipt's block cache would hold `ip`: libipt keeps one per image
  // section (a file's bytes at an offset), whatever image or decoder maps
  // it, so the key names the section and the offset in it. The default,
  // the address itself, suits a decoder that sees one image. False where
  // libipt has no block cache: memory read through the image's callback
  // (JIT code), which it decodes as a first pass every time
  // (pt_blk_proceed_no_event_uncached) and never caches.
  virtual bool LibiptCacheKey(uint64_t ip, uint64_t* key) {
    *key = ip;
    return true;
  }
};

// What libipt's block caches hold, by LibiptCacheKey, for decoders that
// share them: libipt's live in its image section cache, so the decoders of
// every stream of a recording (one iscache) see what the earlier ones
// filled, and a block's first pass differs with it. Pass one to each
// FlowDecoder, in the order libipt would decode the streams.
class LibiptCacheModel {
 public:
  LibiptCacheModel();
  ~LibiptCacheModel();
  LibiptCacheModel(const LibiptCacheModel&) = delete;
  LibiptCacheModel& operator=(const LibiptCacheModel&) = delete;

 private:
  friend class FlowDecoder;
  struct Set;
  std::unique_ptr<Set> set_;
};

// libipt 2.0's errata workarounds (pt_cpu_errata sets them from the CPU the
// recording names), applied as libipt applies them: BDM70 (a FUP in PSB+
// while tracing is off), SKD007 (a CYC overlapping an OVF), SKD010 (an OVF whose FUP was
// dropped: a scan ahead for where tracing resumes), SKD022 (a VMLAUNCH/
// VMRESUME async disable), SKL014 (a TIP.PGD with its IP suppressed after
// a direct branch leaves the address filters: Config::addr_ranges), SKL168
// (timing.h), SKZ84 (a TMA with reserved bits skipped), APL11 (a TIP.PGD
// after an OVF), APL12 (a FUP after an OVF while tracing is off). BDM64 (a
// TSX abort the code may not reach; libipt walks the code) is reported as
// kErrUnsupported wherever it may apply. flow_diff_test.cpp's
// ErrataOfTheCpusLibiptKnows runs one CPU of each set against libipt.
struct Errata {
  bool bdm64 = false, bdm70 = false, skd007 = false, skd010 = false, skd022 = false;
  bool skl014 = false, skz84 = false, apl11 = false, apl12 = false;
};

struct Config {
  const uint8_t* begin = nullptr;  // the stream; must outlive the decoder
  const uint8_t* end = nullptr;
  TimingConfig timing;  // with timing.skl168
  Errata errata;
  bool addr_filter = false;  // IA32_RTIT_CTL.ADDRn_CFG configured (libipt addr_cfg != 0)
  // The address ranges as libipt's pt_conf_addr_filter has them (SKL014
  // finds the direct branch that left the filter with them): ADDRn_CFG (1
  // filter, 2 TraceStop) and the inclusive range [a, b].
  struct AddrRange {
    uint8_t cfg = 0;
    uint64_t a = 0, b = 0;
  };
  std::array<AddrRange, 4> addr_ranges{};
};

class FlowDecoder {
 public:
  // `code` must outlive the decoder.
  // `shared` (may be null: the decoder's own, keyed as `code` says) must
  // outlive the decoder.
  FlowDecoder(const Config& config, CodeReader* code, LibiptCacheModel* shared = nullptr);
  ~FlowDecoder();
  FlowDecoder(const FlowDecoder&) = delete;
  FlowDecoder& operator=(const FlowDecoder&) = delete;

  // Appends up to `max` items to `out` (at least one unless the stream is
  // done) and returns how many; 0 at the end.
  size_t Decode(Item* out, size_t max);
  // The code image changed: forget every cached block.
  void InvalidateCode();
  // Whether the next Decode step decodes a block (no event pending, in a
  // segment): where StreamDecoder switches images between blocks.
  [[nodiscard]] bool BlockNext() const;
  // Once Decode is done where the trace ended in a segment (the status
  // reported the end, as pts_eos): where decoding goes on after the last
  // block, as libipt's next pt_blk_next reports it in the block's ip
  // (decoder->ip: the last branch's destination, known without more
  // trace). False otherwise, and while tracing is disabled.
  [[nodiscard]] bool NextIp(uint64_t* ip) const;

  // Counters (for benchmarks and stats).
  [[nodiscard]] uint64_t instructions() const { return instructions_; }
  [[nodiscard]] size_t cached_blocks() const;

  struct State;  // private

 private:
  std::unique_ptr<State> s_;
  uint64_t instructions_ = 0;
};

}  // namespace ptsnap::flow
