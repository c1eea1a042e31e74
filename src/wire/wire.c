/* RoCEv2 header codec and opcode table (IBTA Vol 1 ch. 9.2-9.4). */
#include "wire.h"

#include <string.h>

#define REQ_SEND (OPF_REQ | OPF_SEND | OPF_PAYLOAD)
#define REQ_WRITE (OPF_REQ | OPF_WRITE | OPF_PAYLOAD)
#define RESP_READ (OPF_RESP | OPF_READ | OPF_PAYLOAD)

#define OPC(op, nm, fl) [op] = { .name = nm, .flags = (fl) }
/* XRC (IBA table 38): the RC opcode plus 0xa0; requests carry an XRCETH */
#define XRC(op, nm, fl) \
	[OP_XRC | (op)] = { .name = "XRC_" nm, .flags = (fl) | (((fl) & OPF_REQ) ? OPF_XRCETH : 0) }
#define RC_AND_XRC(op, nm, fl) OPC(op, nm, fl), XRC(op, nm, fl)

/* Header lengths follow from the flags; see wire_hdr_len(). Order of
 * extension headers: IBTA 9.2 (XRCETH, DETH, RETH, AtomicETH, AETH,
 * AtomicAckETH, ImmDt, IETH). */
const struct wire_opcode wire_opcodes[256] = {
	RC_AND_XRC(OP_SEND_FIRST, "SEND_FIRST", REQ_SEND | OPF_FIRST),
	RC_AND_XRC(OP_SEND_MIDDLE, "SEND_MIDDLE", REQ_SEND | OPF_MIDDLE),
	RC_AND_XRC(OP_SEND_LAST, "SEND_LAST", REQ_SEND | OPF_LAST),
	RC_AND_XRC(OP_SEND_LAST_IMM, "SEND_LAST_WITH_IMMEDIATE", REQ_SEND | OPF_LAST | OPF_IMM),
	RC_AND_XRC(OP_SEND_ONLY, "SEND_ONLY", REQ_SEND | OPF_ONLY),
	RC_AND_XRC(OP_SEND_ONLY_IMM, "SEND_ONLY_WITH_IMMEDIATE", REQ_SEND | OPF_ONLY | OPF_IMM),
	RC_AND_XRC(OP_WRITE_FIRST, "RDMA_WRITE_FIRST", REQ_WRITE | OPF_FIRST | OPF_RETH),
	RC_AND_XRC(OP_WRITE_MIDDLE, "RDMA_WRITE_MIDDLE", REQ_WRITE | OPF_MIDDLE),
	RC_AND_XRC(OP_WRITE_LAST, "RDMA_WRITE_LAST", REQ_WRITE | OPF_LAST),
	RC_AND_XRC(OP_WRITE_LAST_IMM, "RDMA_WRITE_LAST_WITH_IMMEDIATE", REQ_WRITE | OPF_LAST | OPF_IMM),
	RC_AND_XRC(OP_WRITE_ONLY, "RDMA_WRITE_ONLY", REQ_WRITE | OPF_ONLY | OPF_RETH),
	RC_AND_XRC(OP_WRITE_ONLY_IMM, "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
	    REQ_WRITE | OPF_ONLY | OPF_RETH | OPF_IMM),
	RC_AND_XRC(OP_READ_REQ, "RDMA_READ_REQUEST", OPF_REQ | OPF_READ | OPF_ONLY | OPF_RETH),
	RC_AND_XRC(OP_READ_RESP_FIRST, "RDMA_READ_RESPONSE_FIRST", RESP_READ | OPF_FIRST | OPF_AETH),
	RC_AND_XRC(OP_READ_RESP_MIDDLE, "RDMA_READ_RESPONSE_MIDDLE", RESP_READ | OPF_MIDDLE),
	RC_AND_XRC(OP_READ_RESP_LAST, "RDMA_READ_RESPONSE_LAST", RESP_READ | OPF_LAST | OPF_AETH),
	RC_AND_XRC(OP_READ_RESP_ONLY, "RDMA_READ_RESPONSE_ONLY", RESP_READ | OPF_ONLY | OPF_AETH),
	RC_AND_XRC(OP_ACK, "ACKNOWLEDGE", OPF_RESP | OPF_ONLY | OPF_AETH),
	RC_AND_XRC(OP_ATOMIC_ACK, "ATOMIC_ACKNOWLEDGE",
	    OPF_RESP | OPF_ATOMIC | OPF_ONLY | OPF_AETH | OPF_ATMACK),
	RC_AND_XRC(OP_CMP_SWAP, "COMPARE_SWAP", OPF_REQ | OPF_ATOMIC | OPF_ONLY | OPF_ATMETH),
	RC_AND_XRC(OP_FETCH_ADD, "FETCH_ADD", OPF_REQ | OPF_ATOMIC | OPF_ONLY | OPF_ATMETH),
	RC_AND_XRC(OP_SEND_LAST_INV, "SEND_LAST_WITH_INVALIDATE", REQ_SEND | OPF_LAST | OPF_IETH),
	RC_AND_XRC(OP_SEND_ONLY_INV, "SEND_ONLY_WITH_INVALIDATE", REQ_SEND | OPF_ONLY | OPF_IETH),
	/* UC (IBTA 9.2.1 table 38): SEND and RDMA WRITE, no responses */
	OPC(OP_UC | OP_SEND_FIRST, "UC_SEND_FIRST", REQ_SEND | OPF_FIRST),
	OPC(OP_UC | OP_SEND_MIDDLE, "UC_SEND_MIDDLE", REQ_SEND | OPF_MIDDLE),
	OPC(OP_UC | OP_SEND_LAST, "UC_SEND_LAST", REQ_SEND | OPF_LAST),
	OPC(OP_UC | OP_SEND_LAST_IMM, "UC_SEND_LAST_WITH_IMMEDIATE", REQ_SEND | OPF_LAST | OPF_IMM),
	OPC(OP_UC | OP_SEND_ONLY, "UC_SEND_ONLY", REQ_SEND | OPF_ONLY),
	OPC(OP_UC | OP_SEND_ONLY_IMM, "UC_SEND_ONLY_WITH_IMMEDIATE", REQ_SEND | OPF_ONLY | OPF_IMM),
	OPC(OP_UC | OP_WRITE_FIRST, "UC_RDMA_WRITE_FIRST", REQ_WRITE | OPF_FIRST | OPF_RETH),
	OPC(OP_UC | OP_WRITE_MIDDLE, "UC_RDMA_WRITE_MIDDLE", REQ_WRITE | OPF_MIDDLE),
	OPC(OP_UC | OP_WRITE_LAST, "UC_RDMA_WRITE_LAST", REQ_WRITE | OPF_LAST),
	OPC(OP_UC | OP_WRITE_LAST_IMM, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
	    REQ_WRITE | OPF_LAST | OPF_IMM),
	OPC(OP_UC | OP_WRITE_ONLY, "UC_RDMA_WRITE_ONLY", REQ_WRITE | OPF_ONLY | OPF_RETH),
	OPC(OP_UC | OP_WRITE_ONLY_IMM, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
	    REQ_WRITE | OPF_ONLY | OPF_RETH | OPF_IMM),
	/* UD: BTH, DETH (Q_Key, SrcQP), [ImmDt], payload (9.2.1, 9.3.3) */
	OPC(OP_UD_SEND_ONLY, "UD_SEND_ONLY", REQ_SEND | OPF_ONLY | OPF_DETH),
	OPC(OP_UD_SEND_ONLY_IMM, "UD_SEND_ONLY_WITH_IMMEDIATE",
	    REQ_SEND | OPF_ONLY | OPF_DETH | OPF_IMM),
	/* RoCEv2 CNP (annex A17.9.3): BTH + 16 reserved bytes, BECN set */
	OPC(OP_CNP, "CNP", OPF_CNP | OPF_PAYLOAD),
};

static inline size_t wire_hdr_len(uint32_t f)
{
	return BTH_LEN + ((f & OPF_XRCETH) ? XRCETH_LEN : 0) + ((f & OPF_DETH) ? DETH_LEN : 0) + ((f & OPF_RETH) ? RETH_LEN : 0) + ((f & OPF_ATMETH) ? ATMETH_LEN : 0) +
	       ((f & OPF_AETH) ? AETH_LEN : 0) + ((f & OPF_ATMACK) ? ATMACK_LEN : 0) +
	       ((f & OPF_IMM) ? IMMDT_LEN : 0) + ((f & OPF_IETH) ? IETH_LEN : 0);
}

const char *wire_opcode_name(uint8_t op)
{
	return wire_opcodes[op].name ? wire_opcodes[op].name : "UNKNOWN";
}

int wire_parse(const uint8_t *buf, size_t len, struct wire_pkt *p)
{
	const struct wire_opcode *o;
	const uint8_t *h;
	size_t hl;

	if (len < BTH_LEN + ICRC_LEN)
		return WIRE_ERR_SHORT;
	p->opcode = buf[0];
	o = &wire_opcodes[p->opcode];
	if (!o->name)
		return WIRE_ERR_OPCODE;
	/* BTH, IBTA 9.2 figure 39 */
	p->se = buf[1] >> 7;
	p->mig = (buf[1] >> 6) & 1;
	p->padcnt = (buf[1] >> 4) & 3;
	p->tver = buf[1] & 0xf;
	if (p->tver != 0)
		return WIRE_ERR_VERSION;
	p->pkey = (uint16_t)(buf[2] << 8 | buf[3]);
	p->fecn = buf[4] >> 7;
	p->becn = (buf[4] >> 6) & 1;
	p->dqpn = get_be32(buf + 4) & QPN_MASK;
	p->ackreq = buf[8] >> 7;
	/* IBTA 9.2: resv7 is sent as 0 and ignored on receive; uroce's
	 * selective repeat uses its first bit on ACK/NAKs (docs/wire.md). */
	p->sack = (buf[8] >> 6) & 1;
	p->psn = get_be32(buf + 8) & PSN_MASK;

	hl = wire_hdr_len(o->flags);
	if (len < hl + ICRC_LEN)
		return WIRE_ERR_SHORT;
	h = buf + BTH_LEN;
	if (o->flags & OPF_XRCETH) {
		/* XRCETH (IBA 9.3.? XRC): 8 reserved bits, the XRC SRQ number */
		p->xrc_srqn = get_be32(h) & QPN_MASK;
		h += XRCETH_LEN;
	}
	if (o->flags & OPF_DETH) {
		/* 9.3.3: Q_Key, a reserved byte, the source QP */
		p->qkey = get_be32(h);
		p->src_qp = get_be32(h + 4) & QPN_MASK;
		h += DETH_LEN;
	}
	if (o->flags & OPF_RETH) {
		p->va = get_be64(h);
		p->rkey = get_be32(h + 8);
		p->dma_len = get_be32(h + 12);
		h += RETH_LEN;
	}
	if (o->flags & OPF_ATMETH) {
		p->va = get_be64(h);
		p->rkey = get_be32(h + 8);
		p->swap_add = get_be64(h + 12);
		p->compare = get_be64(h + 20);
		h += ATMETH_LEN;
	}
	if (o->flags & OPF_AETH) {
		p->syndrome = h[0];
		p->msn = get_be32(h) & 0xffffff;
		h += AETH_LEN;
	}
	if (o->flags & OPF_ATMACK) {
		p->orig = get_be64(h);
		h += ATMACK_LEN;
	}
	if (o->flags & (OPF_IMM | OPF_IETH)) {
		memcpy(&p->imm_be, h, 4);
		h += 4;
	}
	p->payload = h;
	if (o->flags & OPF_PAYLOAD) {
		size_t rest = len - hl - ICRC_LEN;

		if (rest < p->padcnt || (rest & 3))
			return WIRE_ERR_PAD;
		p->paylen = (uint32_t)(rest - p->padcnt);
	} else {
		if (p->padcnt || len != hl + ICRC_LEN)
			return WIRE_ERR_PAD;
		p->paylen = 0;
	}
	return WIRE_OK;
}

size_t wire_build(uint8_t *buf, const struct wire_pkt *p)
{
	uint32_t f = wire_opcodes[p->opcode].flags;
	uint8_t *h = buf + BTH_LEN;

	buf[0] = p->opcode;
	buf[1] = (uint8_t)(p->se << 7 | p->mig << 6 | (p->padcnt & 3) << 4);
	buf[2] = (uint8_t)(p->pkey >> 8);
	buf[3] = (uint8_t)p->pkey;
	put_be32(buf + 4, p->dqpn & QPN_MASK);
	buf[4] = (uint8_t)(p->fecn << 7 | p->becn << 6);
	put_be32(buf + 8, p->psn & PSN_MASK);
	buf[8] = (uint8_t)(p->ackreq << 7 | (p->sack & 1) << 6);
	if (f & OPF_XRCETH) {
		put_be32(h, p->xrc_srqn & QPN_MASK);
		h += XRCETH_LEN;
	}
	if (f & OPF_DETH) {
		put_be32(h, p->qkey);
		put_be32(h + 4, p->src_qp & QPN_MASK); /* the reserved byte is 0 */
		h += DETH_LEN;
	}
	if (f & OPF_RETH) {
		put_be64(h, p->va);
		put_be32(h + 8, p->rkey);
		put_be32(h + 12, p->dma_len);
		h += RETH_LEN;
	}
	if (f & OPF_ATMETH) {
		put_be64(h, p->va);
		put_be32(h + 8, p->rkey);
		put_be64(h + 12, p->swap_add);
		put_be64(h + 20, p->compare);
		h += ATMETH_LEN;
	}
	if (f & OPF_AETH) {
		put_be32(h, p->msn & 0xffffff);
		h[0] = p->syndrome;
		h += AETH_LEN;
	}
	if (f & OPF_ATMACK) {
		put_be64(h, p->orig);
		h += ATMACK_LEN;
	}
	if (f & (OPF_IMM | OPF_IETH)) {
		memcpy(h, &p->imm_be, 4);
		h += 4;
	}
	return (size_t)(h - buf);
}
