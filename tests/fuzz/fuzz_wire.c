/* libFuzzer target: the receive path's packet decoding. Any byte string is
 * parsed as a UDP payload; parsed packets get their ICRC checked (with
 * the IP ID recovery), a rebuild from the parsed fields must parse back to
 * the same fields. Nothing may crash, read out of bounds or disagree.
 *   make fuzz   (clang -fsanitize=fuzzer,address,undefined) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_pkt p, q;
	uint8_t buf[MAX_HDR_LEN + 64];
	struct wire_ip4 ip = { .saddr = 0x0100007f, .daddr = 0x0100007f, .sport = 0x8001,
			       .dport = ROCE_V2_PORT };
	struct iovec iov;
	uint32_t icrc;
	uint16_t id;
	size_t hl;

	memset(&p, 0, sizeof(p));
	if (wire_parse(data, size, &p) != WIRE_OK)
		return 0;
	if (p.payload < data || p.payload + p.paylen > data + size)
		abort(); /* payload must lie inside the packet */
	iov.iov_base = (void *)data;
	iov.iov_len = size - ICRC_LEN;
	icrc = wire_icrc_v4(&ip, &iov, 1);
	(void)wire_icrc_solve_id(icrc, icrc ^ ((uint32_t)data[size - 1] << 24), 8 + size, &id);
	/* headers rebuilt from the parsed fields parse to the same fields */
	hl = wire_build(buf, &p);
	if (hl > MAX_HDR_LEN)
		abort();
	memset(buf + hl, 0, sizeof(buf) - hl);
	{
		size_t len = hl + ((wire_opcodes[p.opcode].flags & OPF_PAYLOAD) ? 4 : 0) + ICRC_LEN;

		if (wire_opcodes[p.opcode].flags & OPF_PAYLOAD)
			buf[1] = (uint8_t)((buf[1] & ~0x30) | 0x00);
		memset(&q, 0, sizeof(q));
		if (wire_parse(buf, len, &q) != WIRE_OK || q.opcode != p.opcode || q.psn != p.psn ||
		    q.dqpn != p.dqpn || q.pkey != p.pkey)
			abort();
	}
	return 0;
}
