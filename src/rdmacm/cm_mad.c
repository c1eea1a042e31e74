/* IBTA CM messages (IBA vol 1, 12.6): the byte layout of REQ, MRA, REJ, REP,
 * RTU, DREQ, DREP, SIDR_REQ and SIDR_REP inside a 256-byte MAD. This is the
 * only place that swaps bytes for the CM wire. Offsets below are from the
 * start of the MAD data (byte 24 of the MAD); bit fields are numbered from
 * the least significant bit of their byte. */
#include "cm.h"

#include <string.h>

static void put8(uint8_t *d, size_t off, uint8_t v)
{
	d[off] = v;
}

static void put16(uint8_t *d, size_t off, uint16_t v)
{
	d[off] = (uint8_t)(v >> 8);
	d[off + 1] = (uint8_t)v;
}

static void put24(uint8_t *d, size_t off, uint32_t v)
{
	d[off] = (uint8_t)(v >> 16);
	d[off + 1] = (uint8_t)(v >> 8);
	d[off + 2] = (uint8_t)v;
}

static void put32(uint8_t *d, size_t off, uint32_t v)
{
	put16(d, off, (uint16_t)(v >> 16));
	put16(d, off + 2, (uint16_t)v);
}

static void put64(uint8_t *d, size_t off, uint64_t v)
{
	put32(d, off, (uint32_t)(v >> 32));
	put32(d, off + 4, (uint32_t)v);
}

/* bits [shift, shift+width) of byte off */
static void putb(uint8_t *d, size_t off, unsigned shift, unsigned width, unsigned v)
{
	uint8_t mask = (uint8_t)(((1u << width) - 1) << shift);

	d[off] = (uint8_t)((d[off] & ~mask) | ((v << shift) & mask));
}

static uint16_t get16(const uint8_t *d, size_t off)
{
	return (uint16_t)(d[off] << 8 | d[off + 1]);
}

static uint32_t get24(const uint8_t *d, size_t off)
{
	return (uint32_t)d[off] << 16 | (uint32_t)d[off + 1] << 8 | d[off + 2];
}

static uint32_t get32(const uint8_t *d, size_t off)
{
	return (uint32_t)get16(d, off) << 16 | get16(d, off + 2);
}

static uint64_t get64(const uint8_t *d, size_t off)
{
	return (uint64_t)get32(d, off) << 32 | get32(d, off + 4);
}

static unsigned getb(const uint8_t *d, size_t off, unsigned shift, unsigned width)
{
	return (d[off] >> shift) & ((1u << width) - 1);
}

static size_t pdata_off(uint16_t attr)
{
	switch (attr) {
	case CM_REQ: return 140;
	case CM_MRA: return 10;
	case CM_REJ: return 84;
	case CM_REP: return 36;
	case CM_RTU: return 8;
	case CM_DREQ: return 12;
	case CM_DREP: return 8;
	case CM_SIDR_REQ: return 16;
	case CM_SIDR_REP: return 96;
	}
	return 0;
}

size_t cm_pdata_size(uint16_t attr)
{
	switch (attr) {
	case CM_REQ: return CM_REQ_PDATA;
	case CM_MRA: return CM_MRA_PDATA;
	case CM_REJ: return CM_REJ_PDATA;
	case CM_REP: return CM_REP_PDATA;
	case CM_RTU: return CM_RTU_PDATA;
	case CM_DREQ: return CM_DREQ_PDATA;
	case CM_DREP: return CM_DREP_PDATA;
	case CM_SIDR_REQ: return CM_SIDR_REQ_PDATA;
	case CM_SIDR_REP: return CM_SIDR_REP_PDATA;
	}
	return 0;
}

void cm_mad_build(const struct cm_msg *m, uint8_t mad[CM_MAD_SIZE])
{
	uint8_t *d = mad + CM_MAD_HDR;

	memset(mad, 0, CM_MAD_SIZE);
	/* common MAD header (IBA 13.4.3) */
	mad[0] = 1; /* base version */
	mad[1] = CM_MGMT_CLASS;
	mad[2] = CM_CLASS_VERSION;
	mad[3] = CM_METHOD_SEND;
	put64(mad, 8, m->tid);
	put16(mad, 16, m->attr);
	put32(mad, 20, m->attr_mod);

	switch (m->attr) {
	case CM_REQ: /* table 106 */
		put32(d, 0, m->local_comm_id);
		put24(d, 5, m->vendor_id);
		put64(d, 8, m->service_id);
		put64(d, 16, m->ca_guid);
		put32(d, 28, m->qkey);
		put24(d, 32, m->qpn);
		put8(d, 35, m->resp_res);
		put8(d, 39, m->init_depth);
		putb(d, 43, 3, 5, m->remote_cm_timeout);
		putb(d, 43, 1, 2, m->transport);
		putb(d, 43, 0, 1, m->flow_control);
		put24(d, 44, m->psn);
		putb(d, 47, 3, 5, m->local_cm_timeout);
		putb(d, 47, 0, 3, m->retry_count);
		put16(d, 48, m->pkey);
		putb(d, 50, 4, 4, m->mtu);
		putb(d, 50, 0, 3, m->rnr_retry);
		putb(d, 51, 4, 4, m->max_cm_retries);
		putb(d, 51, 3, 1, m->srq);
		put16(d, 52, m->local_lid);
		put16(d, 54, m->remote_lid);
		memcpy(d + 56, m->local_gid, 16);
		memcpy(d + 72, m->remote_gid, 16);
		put32(d, 88, m->flow_label << 12);
		putb(d, 91, 0, 6, m->packet_rate);
		put8(d, 92, m->traffic_class);
		put8(d, 93, m->hop_limit);
		putb(d, 94, 4, 4, m->sl);
		putb(d, 94, 3, 1, m->subnet_local);
		putb(d, 95, 3, 5, m->local_ack_timeout);
		break;
	case CM_MRA: /* table 107 */
		put32(d, 0, m->local_comm_id);
		put32(d, 4, m->remote_comm_id);
		putb(d, 8, 6, 2, m->msg);
		putb(d, 9, 3, 5, m->service_timeout);
		break;
	case CM_REJ: /* table 108 */
		put32(d, 0, m->local_comm_id);
		put32(d, 4, m->remote_comm_id);
		putb(d, 8, 6, 2, m->msg);
		putb(d, 9, 1, 7, m->ari_len);
		put16(d, 10, m->reason);
		memcpy(d + 12, m->ari, sizeof(m->ari));
		break;
	case CM_REP: /* table 110 */
		put32(d, 0, m->local_comm_id);
		put32(d, 4, m->remote_comm_id);
		put32(d, 8, m->qkey);
		put24(d, 12, m->qpn);
		put8(d, 15, (uint8_t)(m->vendor_id >> 16));
		put8(d, 19, (uint8_t)(m->vendor_id >> 8));
		put24(d, 20, m->psn);
		put8(d, 23, (uint8_t)m->vendor_id);
		put8(d, 24, m->resp_res);
		put8(d, 25, m->init_depth);
		putb(d, 26, 3, 5, m->target_ack_delay);
		putb(d, 26, 1, 2, m->failover);
		putb(d, 26, 0, 1, m->flow_control);
		putb(d, 27, 5, 3, m->rnr_retry);
		putb(d, 27, 4, 1, m->srq);
		put64(d, 28, m->ca_guid);
		break;
	case CM_RTU: /* table 111 */
	case CM_DREP: /* table 113 */
		put32(d, 0, m->local_comm_id);
		put32(d, 4, m->remote_comm_id);
		break;
	case CM_DREQ: /* table 112 */
		put32(d, 0, m->local_comm_id);
		put32(d, 4, m->remote_comm_id);
		put24(d, 8, m->qpn);
		break;
	case CM_SIDR_REQ: /* table 119 */
		put32(d, 0, m->local_comm_id);
		put16(d, 4, m->pkey);
		put64(d, 8, m->service_id);
		break;
	case CM_SIDR_REP: /* table 120 */
		put32(d, 0, m->local_comm_id);
		put8(d, 4, m->status);
		put8(d, 5, m->ari_len);
		put16(d, 6, (uint16_t)(m->vendor_id >> 8));
		put24(d, 8, m->qpn);
		put8(d, 11, (uint8_t)m->vendor_id);
		put64(d, 12, m->service_id);
		put32(d, 20, m->qkey);
		memcpy(d + 24, m->ari, sizeof(m->ari));
		break;
	}
	memcpy(d + pdata_off(m->attr), m->pdata, cm_pdata_size(m->attr));
}

int cm_mad_parse(const uint8_t mad[CM_MAD_SIZE], struct cm_msg *m)
{
	const uint8_t *d = mad + CM_MAD_HDR;

	memset(m, 0, sizeof(*m));
	if (mad[0] != 1 || mad[1] != CM_MGMT_CLASS || mad[2] != CM_CLASS_VERSION ||
	    mad[3] != CM_METHOD_SEND)
		return -1;
	m->tid = get64(mad, 8);
	m->attr = get16(mad, 16);
	m->attr_mod = get32(mad, 20);
	if (!cm_pdata_size(m->attr))
		return -1;
	switch (m->attr) {
	case CM_REQ:
		m->local_comm_id = get32(d, 0);
		m->vendor_id = get24(d, 5);
		m->service_id = get64(d, 8);
		m->ca_guid = get64(d, 16);
		m->qkey = get32(d, 28);
		m->qpn = get24(d, 32);
		m->resp_res = d[35];
		m->init_depth = d[39];
		m->remote_cm_timeout = (uint8_t)getb(d, 43, 3, 5);
		m->transport = (uint8_t)getb(d, 43, 1, 2);
		m->flow_control = (uint8_t)getb(d, 43, 0, 1);
		m->psn = get24(d, 44);
		m->local_cm_timeout = (uint8_t)getb(d, 47, 3, 5);
		m->retry_count = (uint8_t)getb(d, 47, 0, 3);
		m->pkey = get16(d, 48);
		m->mtu = (uint8_t)getb(d, 50, 4, 4);
		m->rnr_retry = (uint8_t)getb(d, 50, 0, 3);
		m->max_cm_retries = (uint8_t)getb(d, 51, 4, 4);
		m->srq = (uint8_t)getb(d, 51, 3, 1);
		m->local_lid = get16(d, 52);
		m->remote_lid = get16(d, 54);
		memcpy(m->local_gid, d + 56, 16);
		memcpy(m->remote_gid, d + 72, 16);
		m->flow_label = get32(d, 88) >> 12;
		m->packet_rate = (uint8_t)getb(d, 91, 0, 6);
		m->traffic_class = d[92];
		m->hop_limit = d[93];
		m->sl = (uint8_t)getb(d, 94, 4, 4);
		m->subnet_local = (uint8_t)getb(d, 94, 3, 1);
		m->local_ack_timeout = (uint8_t)getb(d, 95, 3, 5);
		break;
	case CM_MRA:
		m->local_comm_id = get32(d, 0);
		m->remote_comm_id = get32(d, 4);
		m->msg = (uint8_t)getb(d, 8, 6, 2);
		m->service_timeout = (uint8_t)getb(d, 9, 3, 5);
		break;
	case CM_REJ:
		m->local_comm_id = get32(d, 0);
		m->remote_comm_id = get32(d, 4);
		m->msg = (uint8_t)getb(d, 8, 6, 2);
		m->ari_len = (uint8_t)getb(d, 9, 1, 7);
		m->reason = get16(d, 10);
		memcpy(m->ari, d + 12, sizeof(m->ari));
		break;
	case CM_REP:
		m->local_comm_id = get32(d, 0);
		m->remote_comm_id = get32(d, 4);
		m->qkey = get32(d, 8);
		m->qpn = get24(d, 12);
		m->vendor_id = (uint32_t)d[15] << 16 | (uint32_t)d[19] << 8 | d[23];
		m->psn = get24(d, 20);
		m->resp_res = d[24];
		m->init_depth = d[25];
		m->target_ack_delay = (uint8_t)getb(d, 26, 3, 5);
		m->failover = (uint8_t)getb(d, 26, 1, 2);
		m->flow_control = (uint8_t)getb(d, 26, 0, 1);
		m->rnr_retry = (uint8_t)getb(d, 27, 5, 3);
		m->srq = (uint8_t)getb(d, 27, 4, 1);
		m->ca_guid = get64(d, 28);
		break;
	case CM_RTU:
	case CM_DREP:
		m->local_comm_id = get32(d, 0);
		m->remote_comm_id = get32(d, 4);
		break;
	case CM_DREQ:
		m->local_comm_id = get32(d, 0);
		m->remote_comm_id = get32(d, 4);
		m->qpn = get24(d, 8);
		break;
	case CM_SIDR_REQ:
		m->local_comm_id = get32(d, 0);
		m->pkey = get16(d, 4);
		m->service_id = get64(d, 8);
		break;
	case CM_SIDR_REP:
		m->local_comm_id = get32(d, 0);
		m->status = d[4];
		m->ari_len = d[5];
		m->vendor_id = (uint32_t)get16(d, 6) << 8 | d[11];
		m->qpn = get24(d, 8);
		m->service_id = get64(d, 12);
		m->qkey = get32(d, 20);
		memcpy(m->ari, d + 24, sizeof(m->ari));
		break;
	}
	memcpy(m->pdata, d + pdata_off(m->attr), cm_pdata_size(m->attr));
	return 0;
}

/* rdma_cm's header in REQ/SIDR_REQ private data: version 0, IP version in the
 * high nibble, the active side's port, then source and destination address
 * (IPv4 in the last 4 of 16 bytes). */
void cm_hdr_build(uint8_t *p, uint16_t src_port, uint32_t src_ip, uint32_t dst_ip)
{
	memset(p, 0, CM_CMA_HDR);
	p[0] = 0x00;
	p[1] = 4 << 4;
	put16(p, 2, src_port);
	memcpy(p + 4 + 12, &src_ip, 4);
	memcpy(p + 20 + 12, &dst_ip, 4);
}

int cm_hdr_check(const uint8_t *p)
{
	return p[0] == 0x00 && ((p[1] >> 4) == 4 || (p[1] >> 4) == 6) ? 0 : -1;
}
