#include "emulate/pt_packets.h"

#include <intel-pt.h>

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace ptsnap::emulate {
namespace {

pt_packet Packet(pt_packet_type type) {
  pt_packet p;
  std::memset(&p, 0, sizeof(p));
  p.type = type;
  return p;
}

pt_encoder* EncoderOver(std::vector<uint8_t>& buf) {
  pt_config cfg;
  pt_config_init(&cfg);
  cfg.begin = buf.data();
  cfg.end = buf.data() + buf.size();
  pt_encoder* enc = pt_alloc_encoder(&cfg);
  PTSNAP_CHECK(enc != nullptr) << "pt_alloc_encoder failed (out of memory)";
  return enc;
}

// The longest packet libipt encodes (PSB is 16 bytes; a full IP 9).
constexpr size_t kMaxPacket = 32;

}  // namespace

PacketWriter::PacketWriter(size_t capacity) : buf_(std::max(capacity, kMaxPacket)) {
  enc_ = EncoderOver(buf_);
}

PacketWriter::~PacketWriter() { pt_free_encoder(enc_); }

void PacketWriter::Grow(size_t n) {
  buf_.resize(std::max(buf_.size() * 2, size_ + n + kMaxPacket));
  pt_free_encoder(enc_);
  enc_ = EncoderOver(buf_);
}

void PacketWriter::Emit(const pt_packet& p) {
  if (buf_.size() - size_ < kMaxPacket) Grow(kMaxPacket);
  // The encoder continues after the bytes so far, Raw's included.
  PTSNAP_CHECK_OK(pt_enc_sync_set(enc_, size_));
  const int r = pt_enc_next(enc_, &p);
  PTSNAP_CHECK(r >= 0) << "pt_enc_next: " << pt_errstr(pt_errcode(r)) << " (packet type "
                       << static_cast<int>(p.type) << ")";
  size_ += static_cast<size_t>(r);
}

void PacketWriter::Psb() { Emit(Packet(ppt_psb)); }
void PacketWriter::PsbEnd() { Emit(Packet(ppt_psbend)); }
void PacketWriter::Ovf() { Emit(Packet(ppt_ovf)); }
void PacketWriter::TraceStop() { Emit(Packet(ppt_stop)); }

void PacketWriter::Pip(uint64_t cr3, bool non_root) {
  pt_packet p = Packet(ppt_pip);
  p.payload.pip.cr3 = cr3;
  p.payload.pip.nr = non_root ? 1 : 0;
  Emit(p);
}

void PacketWriter::Vmcs(uint64_t base) {
  pt_packet p = Packet(ppt_vmcs);
  p.payload.vmcs.base = base;
  Emit(p);
}

void PacketWriter::Ptw(uint64_t payload, int bytes, bool ip) {
  pt_packet p = Packet(ppt_ptw);
  p.payload.ptw.plc = bytes == 8 ? 1 : 0;
  p.payload.ptw.payload = payload;
  p.payload.ptw.ip = ip ? 1 : 0;
  Emit(p);
}

void PacketWriter::Exstop(bool ip) {
  pt_packet p = Packet(ppt_exstop);
  p.payload.exstop.ip = ip ? 1 : 0;
  Emit(p);
}

void PacketWriter::Mwait(uint32_t hints, uint32_t ext) {
  pt_packet p = Packet(ppt_mwait);
  p.payload.mwait.hints = hints;
  p.payload.mwait.ext = ext;
  Emit(p);
}

void PacketWriter::Pwre(uint8_t state, uint8_t sub_state, bool hw) {
  pt_packet p = Packet(ppt_pwre);
  p.payload.pwre.state = state;
  p.payload.pwre.sub_state = sub_state;
  p.payload.pwre.hw = hw ? 1 : 0;
  Emit(p);
}

void PacketWriter::Pwrx(uint8_t last, uint8_t deepest, uint8_t wake) {
  pt_packet p = Packet(ppt_pwrx);
  p.payload.pwrx.last = last;
  p.payload.pwrx.deepest = deepest;
  p.payload.pwrx.interrupt = (wake & 1) != 0 ? 1 : 0;
  p.payload.pwrx.store = (wake & 4) != 0 ? 1 : 0;
  p.payload.pwrx.autonomous = (wake & 8) != 0 ? 1 : 0;
  Emit(p);
}

void PacketWriter::Tsc(uint64_t tsc) {
  pt_packet p = Packet(ppt_tsc);
  p.payload.tsc.tsc = tsc;
  Emit(p);
}

void PacketWriter::Tma(uint16_t ctc, uint16_t fc) {
  pt_packet p = Packet(ppt_tma);
  p.payload.tma.ctc = ctc;
  p.payload.tma.fc = fc;
  Emit(p);
}

void PacketWriter::Cbr(uint8_t ratio) {
  pt_packet p = Packet(ppt_cbr);
  p.payload.cbr.ratio = ratio;
  Emit(p);
}

void PacketWriter::ModeExec64() {
  pt_packet p = Packet(ppt_mode);
  p.payload.mode.leaf = pt_mol_exec;
  p.payload.mode.bits.exec.csl = 1;
  Emit(p);
}

void PacketWriter::ModeTsx(bool intx, bool abrt) {
  pt_packet p = Packet(ppt_mode);
  p.payload.mode.leaf = pt_mol_tsx;
  p.payload.mode.bits.tsx.intx = intx ? 1 : 0;
  p.payload.mode.bits.tsx.abrt = abrt ? 1 : 0;
  Emit(p);
}

void PacketWriter::Ip(IpPacket type, uint64_t ip, IpCompression ipc) {
  static constexpr pt_packet_type kTypes[] = {ppt_tip, ppt_tip_pge, ppt_tip_pgd, ppt_fup};
  pt_packet p = Packet(kTypes[static_cast<int>(type)]);
  p.payload.ip.ipc = static_cast<pt_ip_compression>(ipc);
  switch (ipc) {
    case IpCompression::kSuppressed: p.payload.ip.ip = 0; break;
    case IpCompression::kUpdate16: p.payload.ip.ip = ip & 0xffff; break;
    case IpCompression::kUpdate32: p.payload.ip.ip = ip & 0xffffffff; break;
    case IpCompression::kUpdate48:
    case IpCompression::kSext48: p.payload.ip.ip = ip & 0xffffffffffff; break;
    case IpCompression::kFull: p.payload.ip.ip = ip; break;
  }
  Emit(p);
}

void PacketWriter::LongTnt(uint64_t payload, int bits) {
  pt_packet p = Packet(ppt_tnt_64);
  p.payload.tnt.bit_size = static_cast<uint8_t>(bits);
  p.payload.tnt.payload = payload;
  Emit(p);
}

void PacketWriter::Cyc(uint64_t v) {
  // Byte 0: CYC[4:0], Exp, 0b11; then 7 bits a byte with Exp in bit 0.
  uint8_t b[10];
  size_t n = 0;
  b[n] = static_cast<uint8_t>(((v & 0x1f) << 3) | 0x3);
  v >>= 5;
  while (v != 0) {
    b[n] |= n == 0 ? 0x4 : 0x1;  // more bytes follow
    ++n;
    b[n] = static_cast<uint8_t>((v & 0x7f) << 1);
    v >>= 7;
  }
  Raw(b, n + 1);
}

}  // namespace ptsnap::emulate
