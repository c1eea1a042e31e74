/* librdmacm's API (rdma_cm(7)): event channels, ids, address and route
 * resolution, connect/accept/reject/disconnect, QP helpers, multicast.
 * Application-thread side; the wire and the timers are in cm_core.c. */
#include "cm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CM_LOCAL_ACK_TIMEOUT 17 /* packet lifetime 16 (the kernel's RoCE default) + 1 */
#define CM_HOP_LIMIT 64
#define CM_PKT_LIFETIME 16

static int fail(int e)
{
	errno = e;
	return -1;
}

static void lock(void)
{
	pthread_mutex_lock(&cm.lock);
}

static void unlock(void)
{
	pthread_mutex_unlock(&cm.lock);
}

static int cm_complete_id(struct cm_id *p);

/* ---- event channels ------------------------------------------------------ */

CM_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cm_channel *ch;

	if (cm_init())
		return NULL;
	ch = cm_channel_new();
	return ch ? &ch->ch : NULL;
}

CM_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (!channel)
		return;
	lock();
	cm_channel_free(cm_channel_of(channel));
	unlock();
}

/* ---- ids ----------------------------------------------------------------- */

struct cm_id *cm_id_alloc(struct cm_channel *ch, void *context, enum rdma_port_space ps,
			  enum ibv_qp_type qp_type)
{
	struct cm_id *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	if (!ch) {
		ch = cm_channel_new();
		if (!ch) {
			free(p);
			return NULL;
		}
		p->sync = 1;
	}
	p->id.channel = &ch->ch;
	p->id.context = context;
	p->id.ps = ps;
	p->id.qp_type = qp_type;
	p->local_comm = cm_rand32();
	p->timeout = CM_LOCAL_ACK_TIMEOUT;
	p->retry_count = 7;
	p->rnr_retry = 7;
	pthread_cond_init(&p->cond, NULL);
	p->next = cm.ids;
	if (cm.ids)
		cm.ids->pprev = &p->next;
	p->pprev = &cm.ids;
	cm.ids = p;
	return p;
}

void cm_id_set_dev(struct cm_id *p, struct cm_dev *dev, int gid_index)
{
	p->dev = dev;
	p->sgid_index = gid_index;
	p->id.verbs = dev->verbs;
	p->id.port_num = 1;
	if (!p->id.pd)
		p->id.pd = dev->pd;
	p->mtu = dev->active_mtu;
	p->id.route.addr.addr.ibaddr.sgid = dev->gid[gid_index];
	p->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
}

static void id_unlist(struct cm_id *p)
{
	if (!p->pprev)
		return;
	*p->pprev = p->next;
	if (p->next)
		p->next->pprev = p->pprev;
	p->pprev = NULL;
}

static int ps_qp_type(enum rdma_port_space ps, enum ibv_qp_type *t)
{
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_IB:
		*t = IBV_QPT_RC;
		return 0;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		*t = IBV_QPT_UD;
		return 0;
	}
	return -1;
}

static int create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		     enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct cm_id *p;

	if (!id)
		return fail(EINVAL);
	if (cm_init())
		return -1;
	lock();
	/* Open the devices now, so that binding and listening later are as
	 * quick as with the kernel: programs send the port they bound to
	 * their peer before calling rdma_listen (qperf does). */
	if (cm_devs_load()) {
		unlock();
		return -1;
	}
	p = cm_id_alloc(channel ? cm_channel_of(channel) : NULL, context, ps, qp_type);
	unlock();
	if (!p)
		return fail(ENOMEM);
	*id = &p->id;
	return 0;
}

CM_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			     void *context, enum rdma_port_space ps)
{
	enum ibv_qp_type t;

	if (ps_qp_type(ps, &t))
		return fail(EINVAL);
	return create_id(channel, id, context, ps, t);
}

/* Frees the unretrieved events of p; a connection request p (a listener)
 * never handed out takes its new id with it. Lock held. */
static void drop_events(struct cm_id *p);
static void id_free_locked(struct cm_id *p);

static void tell_peer_goodbye(struct cm_id *p)
{
	int ud = p->id.qp_type == IBV_QPT_UD;

	switch (p->state) {
	case CM_REQ_RCVD:
		if (ud)
			cm_send_simple(p, CM_SIDR_REP, CM_SIDR_REJECT, NULL, 0);
		else
			cm_send_simple(p, CM_REJ, CM_REJ_CONSUMER_DEFINED, NULL, 0);
		break;
	case CM_REP_SENT:
	case CM_REP_RCVD:
	case CM_RESPONSE:
		cm_send_simple(p, CM_REJ, CM_REJ_CONSUMER_DEFINED, NULL, 0);
		break;
	case CM_REQ_SENT:
		if (!ud)
			cm_send_simple(p, CM_REJ, CM_REJ_TIMEOUT, NULL, 0);
		break;
	case CM_ESTABLISHED:
		cm_send_simple(p, CM_DREQ, 0, NULL, 0);
		break;
	case CM_DREQ_RCVD:
		cm_send_simple(p, CM_DREP, 0, NULL, 0);
		break;
	default:
		break;
	}
}

/* Closes p's sockets and takes it off the wire and the timers. Lock held. */
static void id_detach(struct cm_id *p)
{
	tell_peer_goodbye(p);
	cm_set_timer(p, CM_T_NONE, 0); /* a request's resend too */
	cm_req_drop(p);
	if (p->conn) {
		cm_conn_finish(p->conn);
		p->conn = NULL;
	}
	if (p->sock) {
		cm_conn_kill(p->sock);
		p->sock = NULL;
	}
	/* sockets accepted for this listener that sent no request yet */
	cm_listener_gone(p);
	for (struct cm_id *q = cm.ids; q; q = q->next)
		if (q->listener == p)
			q->listener = NULL;
	p->state = CM_FAILED;
}

static void id_free_locked(struct cm_id *p)
{
	id_detach(p);
	drop_events(p);
	id_unlist(p);
	pthread_cond_destroy(&p->cond);
	if (p->sync)
		cm_channel_free(cm_channel_of(p->id.channel));
	free(p->qp_init_attr);
	free(p->connect_pdata);
	while (p->mcs) {
		struct cm_mc *mc = p->mcs;

		p->mcs = mc->next;
		free(mc);
	}
	free(p);
}

static void drop_events(struct cm_id *p)
{
	struct cm_channel *ch = cm_channel_of(p->id.channel);
	struct cm_event *e;

again:
	for (e = ch->head; e; e = e->next) {
		if (e->owner != p && e->ev.id != &p->id)
			continue;
		cm_channel_unlink(ch, e);
		if (e->conn_id && e->conn_id != p) {
			/* freeing that id drops its events from this queue too */
			id_free_locked(e->conn_id);
			free(e);
			goto again;
		}
		free(e);
		goto again;
	}
}

static void ack_locked(struct cm_event *e)
{
	e->owner->acked++;
	if (e->mc)
		e->mc->acked++;
	pthread_cond_broadcast(&e->owner->cond);
	free(e);
}

CM_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cm_id *p;
	struct cm_channel *sync_ch = NULL;

	if (!id)
		return fail(EINVAL);
	p = cm_id_of(id);
	lock();
	p->destroying = 1;
	id_detach(p);
	drop_events(p);
	if (p->id.event) {
		ack_locked(CM_CONTAINER(p->id.event, struct cm_event, ev));
		p->id.event = NULL;
	}
	/* rdma_destroy_id(3): wait until every event handed out is acked */
	while (p->acked < p->reported)
		pthread_cond_wait(&p->cond, &cm.lock);
	for (struct cm_mc *mc = p->mcs; mc; mc = mc->next)
		if (mc->attached && p->id.qp)
			ibv_detach_mcast(p->id.qp, &mc->mgid, 0);
	id_unlist(p);
	if (p->sync)
		sync_ch = cm_channel_of(p->id.channel);
	unlock();
	if (sync_ch) {
		lock();
		cm_channel_free(sync_ch);
		unlock();
	}
	pthread_cond_destroy(&p->cond);
	free(p->qp_init_attr);
	free(p->connect_pdata);
	while (p->mcs) {
		struct cm_mc *mc = p->mcs;

		p->mcs = mc->next;
		free(mc);
	}
	free(p);
	return 0;
}

/* ---- addresses ----------------------------------------------------------- */

static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* Normalises addr: IPv4, or an IPv4-mapped IPv6 address, gives ip/port and
 * returns AF_INET; the IPv6 wildcard gives AF_INET6; anything else -1. */
static int addr_parse(const struct sockaddr *sa, uint32_t *ip, uint16_t *port)
{
	if (!sa)
		return -1;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)sa;

		*ip = s->sin_addr.s_addr;
		*port = ntohs(s->sin_port);
		return AF_INET;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)sa;

		*port = ntohs(s->sin6_port);
		if (!memcmp(s->sin6_addr.s6_addr, v4mapped, 12)) {
			memcpy(ip, s->sin6_addr.s6_addr + 12, 4);
			return AF_INET;
		}
		if (IN6_IS_ADDR_UNSPECIFIED(&s->sin6_addr)) {
			*ip = 0;
			return AF_INET6;
		}
	}
	return -1;
}

static void set_sin(struct sockaddr *sa, uint32_t ip, uint16_t port)
{
	struct sockaddr_in *s = (struct sockaddr_in *)sa;

	memset(s, 0, sizeof(struct sockaddr_storage));
	s->sin_family = AF_INET;
	s->sin_addr.s_addr = ip;
	s->sin_port = htons(port);
}

static void gid_of_ip(union ibv_gid *g, uint32_t ip)
{
	memset(g, 0, sizeof(*g));
	memcpy(g->raw, v4mapped, 12);
	memcpy(g->raw + 12, &ip, 4);
}

static int port_conflict(struct cm_id *p, uint32_t ip, uint16_t port)
{
	for (struct cm_id *q = cm.ids; q; q = q->next) {
		uint32_t qip;

		if (q == p || !q->sock || !q->port_explicit ||
		    cm_sin_port(&q->id.route.addr.src_addr) != port)
			continue;
		qip = q->id.route.addr.src_addr.sa_family == AF_INET
			      ? cm_sin_ip(&q->id.route.addr.src_addr) : 0;
		if (qip && ip && qip != ip)
			continue;
		if (p->reuseaddr && q->reuseaddr && q->state != CM_LISTEN)
			continue;
		return 1;
	}
	return 0;
}

/* Binds p to (ip, port) (family AF_INET6: the IPv6 wildcard) with a TCP
 * socket, which reserves the port: the CM port P of an address is TCP port
 * P of that address. Lock held. */
static int bind_locked(struct cm_id *p, int family, uint32_t ip, uint16_t port, int prelisten)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, e;
	struct cm_dev *dev = NULL;
	int gidx = 0;

	if (port && port_conflict(p, ip, port))
		return fail(EADDRINUSE);
	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* lets a listener come back while old connections sit in TIME_WAIT;
	 * a port that another socket listens on is still EADDRINUSE */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		int only = p->afonly;

		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof(only));
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		len = sizeof(*s6);
	} else {
		set_sin((struct sockaddr *)&ss, ip, port);
		len = sizeof(struct sockaddr_in);
	}
	if (bind(fd, (struct sockaddr *)&ss, len))
		goto err;
	/* An id the application bound itself listens at once: programs send
	 * the port to their peer before they call rdma_listen (qperf 0.4.11
	 * does), and a request that comes early waits in the backlog instead
	 * of being refused. The CM thread accepts only after rdma_listen.
	 * Not with RDMA_OPTION_ID_REUSEADDR: ids that share a port do not
	 * listen until rdma_listen, as with the kernel. */
	if (prelisten && listen(fd, 1024))
		goto err;
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		goto err;
	if (ip) {
		if (cm_devs_load())
			goto err;
		dev = cm_dev_by_ip(ip, &gidx);
		if (!dev) {
			errno = ENODEV;
			goto err;
		}
	}
	p->sock = cm_conn_new(fd, p);
	if (!p->sock) {
		errno = ENOMEM;
		goto err;
	}
	p->sock->family = family;
	p->sock->prelistening = prelisten;
	p->port_explicit = port != 0;
	memset(&p->id.route.addr.src_storage, 0, sizeof(p->id.route.addr.src_storage));
	memcpy(&p->id.route.addr.src_storage, &ss, len);
	if (dev)
		cm_id_set_dev(p, dev, gidx);
	p->state = CM_ADDR_BOUND;
	return 0;
err:
	e = errno;
	close(fd);
	errno = e;
	return -1;
}

CM_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *p;
	uint32_t ip = 0;
	uint16_t port = 0;
	int family, ret;

	if (!id || !addr)
		return fail(EINVAL);
	p = cm_id_of(id);
	family = addr_parse(addr, &ip, &port);
	if (family < 0)
		return fail(addr->sa_family == AF_INET6 ? ENODEV : EAFNOSUPPORT);
	lock();
	if (p->state != CM_IDLE)
		ret = fail(EINVAL);
	else
		ret = bind_locked(p, family, ip, port, !p->reuseaddr);
	unlock();
	return ret;
}

/* Fills the route of a resolved id: GIDs, one path record. Lock held. */
void cm_fill_route(struct cm_id *p, const union ibv_gid *dgid)
{
	struct ibv_sa_path_rec *r = &p->path;

	p->id.route.addr.addr.ibaddr.dgid = *dgid;
	memset(r, 0, sizeof(*r));
	r->dgid = *dgid;
	r->sgid = p->id.route.addr.addr.ibaddr.sgid;
	r->hop_limit = CM_HOP_LIMIT;
	r->traffic_class = p->tos;
	r->reversible = 1;
	r->numb_path = 1;
	r->pkey = htons(0xffff);
	r->mtu_selector = 2;
	r->mtu = p->dev ? p->dev->active_mtu : IBV_MTU_1024;
	r->rate_selector = 2;
	r->rate = IBV_RATE_100_GBPS;
	r->packet_life_time_selector = 2;
	r->packet_life_time = CM_PKT_LIFETIME;
	p->id.route.path_rec = r;
	p->id.route.num_paths = 1;
}

/* The address vector towards the peer (RC RTR, SIDR, multicast). */
void cm_fill_ud_ah(struct cm_id *p, struct ibv_ah_attr *ah, const union ibv_gid *dgid)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->grh.dgid = *dgid;
	ah->grh.sgid_index = (uint8_t)p->sgid_index;
	ah->grh.hop_limit = CM_HOP_LIMIT;
	ah->grh.traffic_class = p->tos;
	ah->port_num = 1;
}

CM_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				struct sockaddr *dst_addr, int timeout_ms)
{
	struct cm_id *p;
	uint32_t dip = 0, sip = 0;
	uint16_t dport = 0, sport = 0;
	int family, sfam = AF_INET, gidx = 0, ret = 0;
	struct cm_dev *dev;
	struct cm_event *e;
	union ibv_gid dgid;

	if (!id || !dst_addr)
		return fail(EINVAL);
	p = cm_id_of(id);
	family = addr_parse(dst_addr, &dip, &dport);
	if (family != AF_INET)
		return fail(dst_addr->sa_family == AF_INET6 ? ENODEV : EAFNOSUPPORT);
	if (src_addr) {
		sfam = addr_parse(src_addr, &sip, &sport);
		if (sfam < 0)
			return fail(src_addr->sa_family == AF_INET6 ? ENODEV : EAFNOSUPPORT);
	}
	lock();
	if (p->state == CM_IDLE)
		ret = bind_locked(p, sfam, sip, sport, 0);
	else if (p->state != CM_ADDR_BOUND)
		ret = fail(EINVAL);
	if (ret)
		goto out;
	if (p->dev) {
		/* bound to an address: that device */
		sip = cm_sin_ip(&p->id.route.addr.src_addr);
		dev = p->dev;
		gidx = p->sgid_index;
	} else {
		if (cm_route_src(dip, &sip) || cm_devs_load()) {
			ret = -1;
			goto out;
		}
		dev = cm_dev_by_ip(sip, &gidx);
	}
	if (!dev) {
		/* the route leaves through an interface uroce has no device for */
		e = cm_event_new(p, RDMA_CM_EVENT_ADDR_ERROR, -ENODEV);
		if (e)
			cm_queue(p, e);
		goto out;
	}
	cm_id_set_dev(p, dev, gidx);
	sport = ntohs(((struct sockaddr_in *)&p->id.route.addr.src_storage)->sin_port);
	set_sin(&p->id.route.addr.src_addr, sip, sport);
	memset(&p->id.route.addr.dst_storage, 0, sizeof(p->id.route.addr.dst_storage));
	set_sin(&p->id.route.addr.dst_addr, dip, dport);
	gid_of_ip(&dgid, dip);
	p->id.route.addr.addr.ibaddr.dgid = dgid;
	p->state = CM_ADDR_RESOLVED;
	e = cm_event_new(p, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	if (e)
		cm_queue(p, e);
out:
	unlock();
	if (ret)
		return ret;
	return cm_complete_id(p);
}

CM_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct cm_id *p;
	struct cm_event *e;

	if (!id)
		return fail(EINVAL);
	p = cm_id_of(id);
	lock();
	if (p->state != CM_ADDR_RESOLVED) {
		unlock();
		return fail(EINVAL);
	}
	cm_fill_route(p, &p->id.route.addr.addr.ibaddr.dgid);
	p->state = CM_ROUTE_RESOLVED;
	e = cm_event_new(p, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	if (e)
		cm_queue(p, e);
	unlock();
	return cm_complete_id(p);
}

CM_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *p;
	int ret = 0;

	if (!id)
		return fail(EINVAL);
	p = cm_id_of(id);
	lock();
	if (p->state == CM_LISTEN)
		goto out;
	if (p->state == CM_IDLE && bind_locked(p, AF_INET, 0, 0, 1)) {
		ret = -1;
		goto out;
	}
	if (p->state != CM_ADDR_BOUND || !p->sock) {
		ret = fail(EINVAL);
		goto out;
	}
	/* connection requests name the device by the address they came to */
	if (cm_devs_load() || listen(p->sock->fd, backlog > 0 ? backlog : 1024)) {
		ret = -1;
		goto out;
	}
	p->sock->listening = 1;
	cm_log("id %p: listening on port %u", (void *)p, cm_sin_port(&p->id.route.addr.src_addr));
	cm_conn_watch(p->sock);
	p->state = CM_LISTEN;
out:
	unlock();
	return ret;
}

static int param_check(struct cm_id *p, const struct rdma_conn_param *param)
{
	if (p->id.ps != RDMA_PS_TCP && p->id.ps != RDMA_PS_IB)
		return 0;
	if (!p->id.qp && !param)
		return -1;
	if (!param)
		return 0;
	if (param->responder_resources != RDMA_MAX_RESP_RES &&
	    param->responder_resources > p->dev->max_resp_res)
		return -1;
	if (param->initiator_depth != RDMA_MAX_INIT_DEPTH &&
	    param->initiator_depth > p->dev->max_init_depth)
		return -1;
	return 0;
}

/* Starts the TCP connection of an active id and queues its request
 * (p->req) on it. The address the socket is bound to is kept: a refused
 * request is sent again from a new socket bound the same way (cm_core.c,
 * CM_REQ_RESEND_WINDOW_MS). */
static void connect_and_send(struct cm_id *p)
{
	struct cm_conn *c = p->sock;

	p->sock = NULL;
	p->conn = c;
	p->state = CM_REQ_SENT;
	p->req_family = c->family;
	p->req_src_len = sizeof(p->req_src);
	if (getsockname(c->fd, (struct sockaddr *)&p->req_src, &p->req_src_len)) {
		cm_conn_error(c, errno);
		return;
	}
	if (c->prelistening) {
		/* a listening socket cannot connect: the same address on a new
		 * one, bound once the listening one is closed */
		close(c->fd);
		c->fd = cm_req_socket(p);
		c->prelistening = 0;
		if (c->fd < 0) {
			cm_conn_error(c, errno);
			return;
		}
	}
	cm_req_connect(p, c);
}

CM_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	struct cm_id *p;
	struct cm_msg m, *req;
	int ud;
	size_t max, ulen, clen;
	uint32_t sip, dip;

	if (!id)
		return fail(EINVAL);
	p = cm_id_of(id);
	ud = p->id.qp_type == IBV_QPT_UD;
	lock();
	clen = p->connect_pdata_len;
	ulen = param && param->private_data ? param->private_data_len : 0;
	max = (ud ? CM_SIDR_REQ_PDATA : CM_REQ_PDATA) - CM_CMA_HDR;
	if (p->state != CM_ROUTE_RESOLVED || !p->sock || param_check(p, param) ||
	    clen + ulen > max) {
		unlock();
		return fail(EINVAL);
	}
	/* kept for resending while the request goes unanswered */
	req = malloc(sizeof(*req));
	if (!req) {
		unlock();
		return fail(ENOMEM);
	}
	sip = cm_sin_ip(&p->id.route.addr.src_addr);
	dip = cm_sin_ip(&p->id.route.addr.dst_addr);
	memset(&m, 0, sizeof(m));
	m.local_comm_id = p->local_comm;
	m.tid = (uint64_t)p->local_comm << 32;
	m.service_id = cm_service_id(p->id.ps, cm_sin_port(&p->id.route.addr.dst_addr));
	cm_hdr_build(m.pdata, cm_sin_port(&p->id.route.addr.src_addr), sip, dip);
	if (clen)
		memcpy(m.pdata + CM_CMA_HDR, p->connect_pdata, clen);
	if (ulen)
		memcpy(m.pdata + CM_CMA_HDR + clen, param->private_data, ulen);
	free(p->connect_pdata);
	p->connect_pdata = NULL;
	p->connect_pdata_len = 0;
	if (ud) {
		m.attr = CM_SIDR_REQ;
		m.pkey = 0xffff;
	} else {
		int rnr = param ? CM_MIN(param->rnr_retry_count, 7) : 7;

		p->init_depth = param && param->initiator_depth != RDMA_MAX_INIT_DEPTH
					? param->initiator_depth : p->dev->max_init_depth;
		p->resp_res = param && param->responder_resources != RDMA_MAX_RESP_RES
				      ? param->responder_resources : p->dev->max_resp_res;
		p->retry_count = (uint8_t)(param ? CM_MIN(param->retry_count, 7) : 7);
		p->local_qpn = p->id.qp ? p->id.qp->qp_num : param->qp_num;
		p->local_psn = cm_rand32() & 0xffffff;
		p->timeout = p->ack_timeout_set ? p->ack_timeout : CM_LOCAL_ACK_TIMEOUT;
		p->mtu = p->dev->active_mtu;
		m.attr = CM_REQ;
		m.vendor_id = p->local_ece.vendor_id & 0xffffff;
		m.attr_mod = p->local_ece.options;
		m.ca_guid = be64toh(p->dev->guid);
		m.qpn = p->local_qpn;
		m.resp_res = p->resp_res;
		m.init_depth = p->init_depth;
		m.remote_cm_timeout = 20;
		m.local_cm_timeout = 20;
		m.transport = 0; /* RC */
		m.flow_control = param ? param->flow_control : 0;
		m.psn = p->local_psn;
		m.retry_count = p->retry_count;
		m.rnr_retry = (uint8_t)rnr; /* what the passive side's QP is to use */
		m.pkey = 0xffff;
		m.mtu = (uint8_t)p->mtu;
		m.max_cm_retries = 15;
		m.srq = p->id.qp ? !!p->id.qp->srq : (param ? param->srq : 0);
		m.local_lid = m.remote_lid = 0xffff; /* permissive: RoCE has no LIDs */
		memcpy(m.local_gid, p->id.route.addr.addr.ibaddr.sgid.raw, 16);
		memcpy(m.remote_gid, p->id.route.addr.addr.ibaddr.dgid.raw, 16);
		m.traffic_class = p->tos;
		m.hop_limit = CM_HOP_LIMIT;
		m.subnet_local = 1;
		m.packet_rate = IBV_RATE_100_GBPS;
		m.local_ack_timeout = p->timeout;
	}
	*req = m;
	p->req = req;
	p->mra_rcvd = 0;
	p->req_resend_ms = CM_REQ_RESEND_FIRST_MS;
	p->req_resend_end = cm_now() + CM_REQ_RESEND_WINDOW_MS * 1000000ull;
	connect_and_send(p);
	unlock();
	return cm_complete_id(p);
}

/* INIT (again), RTR, RTS from rdma_init_qp_attr, as librdmacm moves an
 * id's QP on rdma_accept and when the REP arrives. Lock not held. */
static int qp_to_rts(struct cm_id *p)
{
	static const enum ibv_qp_state st[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };

	for (size_t i = 0; i < sizeof(st) / sizeof(st[0]); i++) {
		struct ibv_qp_attr a;
		int mask, ret;

		memset(&a, 0, sizeof(a));
		a.qp_state = st[i];
		if (rdma_init_qp_attr(&p->id, &a, &mask))
			return errno;
		ret = ibv_modify_qp(p->id.qp, &a, mask);
		if (ret)
			return ret;
	}
	return 0;
}

static void qp_to_err(struct cm_id *p)
{
	struct ibv_qp_attr a;

	if (!p->id.qp)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	ibv_modify_qp(p->id.qp, &a, IBV_QP_STATE);
}

CM_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	struct cm_id *p;
	struct cm_msg m;
	size_t ulen;
	int ret;

	if (!id)
		return fail(EINVAL);
	p = cm_id_of(id);
	ulen = param && param->private_data ? param->private_data_len : 0;
	lock();
	if (p->state != CM_REQ_RCVD || !p->conn)
		goto einval;
	if (p->id.qp_type == IBV_QPT_UD) {
		if (ulen > CM_SIDR_REP_PDATA || (!p->id.qp && !param))
			goto einval;
		memset(&m, 0, sizeof(m));
		m.attr = CM_SIDR_REP;
		m.tid = (uint64_t)p->remote_comm << 32;
		m.local_comm_id = p->remote_comm;
		m.status = CM_SIDR_SUCCESS;
		m.qpn = p->id.qp ? p->id.qp->qp_num : param->qp_num;
		m.qkey = RDMA_UDP_QKEY;
		m.service_id = cm_service_id(p->id.ps, cm_sin_port(&p->id.route.addr.src_addr));
		if (ulen)
			memcpy(m.pdata, param->private_data, ulen);
		cm_conn_send(p->conn, &m);
		cm_conn_finish(p->conn);
		p->conn = NULL;
		p->state = CM_UD_DONE;
		if (p->sync && p->id.event) {
			ack_locked(CM_CONTAINER(p->id.event, struct cm_event, ev));
			p->id.event = NULL;
		}
		unlock();
		return 0;
	}
	if (ulen > CM_REP_PDATA || param_check(p, param))
		goto einval;
	p->init_depth = !param || param->initiator_depth == RDMA_MAX_INIT_DEPTH
				? (uint8_t)CM_MIN(p->req_init_depth, p->dev->max_init_depth)
				: param->initiator_depth;
	p->resp_res = !param || param->responder_resources == RDMA_MAX_RESP_RES
			      ? (uint8_t)CM_MIN(p->req_resp_res, p->dev->max_resp_res)
			      : param->responder_resources;
	p->local_qpn = p->id.qp ? p->id.qp->qp_num : param->qp_num;
	p->local_psn = cm_rand32() & 0xffffff;
	if (p->ack_timeout_set)
		p->timeout = p->ack_timeout;
	unlock();
	if (p->id.qp) {
		ret = qp_to_rts(p);
		if (ret)
			return fail(ret);
	}
	lock();
	if (p->state != CM_REQ_RCVD || !p->conn)
		goto einval;
	memset(&m, 0, sizeof(m));
	m.attr = CM_REP;
	m.tid = (uint64_t)p->remote_comm << 32;
	m.local_comm_id = p->local_comm;
	m.remote_comm_id = p->remote_comm;
	m.vendor_id = p->remote_ece.vendor_id & 0xffffff;
	m.attr_mod = p->local_ece.options;
	m.qpn = p->local_qpn;
	m.psn = p->local_psn;
	m.resp_res = p->resp_res;
	m.init_depth = p->init_depth;
	m.target_ack_delay = p->dev->ack_delay;
	m.flow_control = param ? param->flow_control : 0;
	m.rnr_retry = (uint8_t)(param ? CM_MIN(param->rnr_retry_count, 7) : 7);
	m.srq = p->id.qp ? !!p->id.qp->srq : param->srq;
	m.ca_guid = be64toh(p->dev->guid);
	if (ulen)
		memcpy(m.pdata, param->private_data, ulen);
	cm_conn_send(p->conn, &m);
	p->state = CM_REP_SENT;
	cm_set_timer(p, CM_T_RTU, cm.timeout_ns);
	unlock();
	return cm_complete_id(p);
einval:
	unlock();
	return fail(EINVAL);
}

static int reject(struct rdma_cm_id *id, const void *pd, uint8_t len, uint16_t reason)
{
	struct cm_id *p;
	int ud;

	if (!id)
		return fail(EINVAL);
	p = cm_id_of(id);
	ud = p->id.qp_type == IBV_QPT_UD;
	lock();
	if (!p->conn || (p->state != CM_REQ_RCVD && p->state != CM_RESPONSE) ||
	    (pd && len > (ud ? CM_SIDR_REP_PDATA : CM_REJ_PDATA))) {
		unlock();
		return fail(EINVAL);
	}
	if (ud)
		cm_send_simple(p, CM_SIDR_REP, CM_SIDR_REJECT, pd, pd ? len : 0);
	else
		cm_send_simple(p, CM_REJ, reason, pd, pd ? len : 0);
	cm_conn_finish(p->conn);
	p->conn = NULL;
	p->state = CM_FAILED;
	unlock();
	return 0;
}

CM_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len, CM_REJ_CONSUMER_DEFINED);
}

CM_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			      uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len, CM_REJ_VENDOR_OPTION_NOT_SUPPORTED);
}

CM_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cm_id *p;
	int sent = 1;

	if (!id)
		return fail(EINVAL);
	p = cm_id_of(id);
	lock();
	switch (p->state) {
	case CM_ESTABLISHED:
	case CM_REP_SENT:
	case CM_REP_RCVD:
	case CM_RESPONSE:
		qp_to_err(p);
		cm_send_simple(p, CM_DREQ, 0, NULL, 0);
		p->state = CM_DREQ_SENT;
		cm_set_timer(p, CM_T_DREQ, cm.timeout_ns);
		break;
	case CM_DREQ_RCVD:
		qp_to_err(p);
		cm_send_simple(p, CM_DREP, 0, NULL, 0);
		cm_enter_timewait(p);
		break;
	case CM_DREQ_SENT:
	case CM_TIMEWAIT:
	case CM_DISCONNECTED:
	case CM_REQ_SENT:
	case CM_REQ_RCVD:
	case CM_FAILED:
		/* nothing to send (the kernel's rdma_disconnect returns 0 here too) */
		qp_to_err(p);
		sent = 0;
		break;
	default:
		unlock();
		return fail(EINVAL);
	}
	unlock();
	return sent ? cm_complete_id(p) : 0;
}

CM_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct cm_id *p;

	if (!id || id->qp)
		return fail(EINVAL);
	p = cm_id_of(id);
	lock();
	if (p->state != CM_RESPONSE) {
		unlock();
		return fail(EINVAL);
	}
	cm_send_simple(p, CM_RTU, 0, NULL, 0);
	p->state = CM_ESTABLISHED;
	unlock();
	return 0;
}

CM_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct cm_id *p;
	int ret = 0;

	if (!id)
		return fail(EINVAL);
	p = cm_id_of(id);
	lock();
	if (event != IBV_EVENT_COMM_EST) {
		ret = fail(EINVAL);
	} else if (p->state == CM_REP_SENT) {
		/* data arrived before the RTU: the connection is up */
		struct cm_event *e = cm_event_new(p, RDMA_CM_EVENT_ESTABLISHED, 0);

		p->state = CM_ESTABLISHED;
		cm_set_timer(p, CM_T_NONE, 0);
		if (e)
			cm_queue(p, e);
	} else if (p->state == CM_ESTABLISHED) {
		ret = fail(EISCONN);
	} else {
		ret = fail(EINVAL);
	}
	unlock();
	return ret;
}

/* ---- events -------------------------------------------------------------- */

/* A blocked read(2) of a descriptor another thread closed: it sleeps until
 * the process ends (pause(2) is a cancellation point). */
static void __attribute__((noreturn)) wait_forever(void)
{
	for (;;)
		pause();
}

CM_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cm_channel *ch;
	struct cm_event *e;
	struct cm_id *q;
	uint64_t v;
	int fd;

	if (!channel || !event)
		return fail(EINVAL);
	ch = cm_channel_of(channel);
again:
	/* Wait on a descriptor of our own, duplicated before taking the
	 * library's lock, as the kernel's blocked read(2) of a ucma
	 * descriptor holds its file: rping's main thread (rdma-core 44)
	 * destroys the channel without joining its CM thread, right after
	 * that thread acknowledged an event, and that thread, back in here,
	 * must be waiting by then, not queued on the lock behind main's
	 * teardown to find the descriptor closed (EBADF, and rping's
	 * exit(-1) after a clean run: CI of 2026-12-07, veth1500/rping).
	 * A channel destroyed under a waiter is the kernel's read(2) on a
	 * file closed meanwhile: it never returns; the waiter must not touch
	 * the freed channel when an event woke it (rping's SIGSEGV when the
	 * peer's DISCONNECTED came during main's teardown: CI of 2026-12-07,
	 * lo/rping). rdma_destroy_event_channel(3): "all rdma_cm_id's
	 * associated with the event channel must be destroyed" first, so no
	 * correct program waits there. A channel gone before the call is
	 * EBADF; its memory is not read (the descriptor comes from the list
	 * of live channels). */
	fd = cm_channel_dup_fd(ch);
	if (fd < 0)
		return -1;
	lock();
	if (!cm_channel_live(ch)) {
		unlock();
		close(fd);
		wait_forever();
	}
	while (!ch->head) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		int err = 0;

		if (fcntl(fd, F_GETFL) & O_NONBLOCK) {
			unlock();
			close(fd);
			return fail(EAGAIN);
		}
		ch->waiters++;
		unlock();
		while (poll(&pfd, 1, -1) < 0 && !err)
			if (errno != EINTR)
				err = errno;
		lock();
		ch->waiters--;
		if (ch->dead) {
			if (!ch->waiters)
				free(ch);
			unlock();
			close(fd);
			wait_forever();
		}
		if (err) {
			unlock();
			close(fd);
			return fail(err);
		}
	}
	close(fd);
	e = ch->head;
	ch->head = e->next;
	if (!ch->head)
		ch->tail = &ch->head;
	if (read(channel->fd, &v, sizeof(v)) != sizeof(v))
		cm_log("channel %d: read %s", channel->fd, strerror(errno));
	e->next = NULL;
	e->owner->reported++;
	if (e->mc)
		e->mc->reported++;
	q = cm_id_of(e->ev.id);
	if (q->connect_error && (e->ev.event == RDMA_CM_EVENT_REJECTED ||
				 e->ev.event == RDMA_CM_EVENT_DISCONNECTED)) {
		ack_locked(e);
		unlock();
		goto again;
	}
	switch (e->ev.event) {
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		if (e->internal != CM_EV_REP)
			break;
		if (q->state != CM_REP_RCVD) {
			e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
			e->ev.status = -ECONNRESET;
			q->connect_error = 1;
		} else if (!q->id.qp) {
			q->state = CM_RESPONSE; /* rdma_establish(3) completes it */
		} else {
			int ret;

			unlock();
			ret = qp_to_rts(q);
			lock();
			if (!ret && q->state == CM_REP_RCVD) {
				cm_send_simple(q, CM_RTU, 0, NULL, 0);
				q->state = CM_ESTABLISHED;
				e->ev.event = RDMA_CM_EVENT_ESTABLISHED;
			} else {
				qp_to_err(q);
				e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
				e->ev.status = ret ? -ret : -ECONNRESET;
				q->connect_error = 1;
				if (q->state == CM_REP_RCVD) {
					cm_send_simple(q, CM_REJ, CM_REJ_CONSUMER_DEFINED, NULL, 0);
					q->state = CM_FAILED;
					cm_conn_finish(q->conn);
					q->conn = NULL;
				}
			}
		}
		break;
	case RDMA_CM_EVENT_REJECTED:
		qp_to_err(q);
		break;
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		if (q->id.qp && e->mc && !e->mc->sendonly && !e->mc->attached) {
			int ret = ibv_attach_mcast(q->id.qp, &e->mc->mgid, 0);

			if (ret) {
				e->ev.event = RDMA_CM_EVENT_MULTICAST_ERROR;
				e->ev.status = -ret;
			} else {
				e->mc->attached = 1;
			}
		}
		break;
	default:
		break;
	}
	unlock();
	*event = &e->ev;
	return 0;
}

CM_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return fail(EINVAL);
	lock();
	ack_locked(CM_CONTAINER(event, struct cm_event, ev));
	unlock();
	return 0;
}

/* Synchronous ids (no channel given): wait for the operation's event, as
 * librdmacm's ucma_complete does; a failure status becomes errno. */
static int cm_complete_id(struct cm_id *p)
{
	struct rdma_cm_event *ev;

	if (!p->sync)
		return 0;
	if (p->id.event) {
		rdma_ack_cm_event(p->id.event);
		p->id.event = NULL;
	}
	if (rdma_get_cm_event(p->id.channel, &ev))
		return -1;
	p->id.event = ev;
	if (ev->status) {
		if (ev->event == RDMA_CM_EVENT_REJECTED)
			return fail(ECONNREFUSED);
		return fail(ev->status < 0 ? -ev->status : ev->status);
	}
	return 0;
}

CM_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cm_id *l;
	struct rdma_cm_event *ev;
	int ret;

	if (!listen || !id)
		return fail(EINVAL);
	l = cm_id_of(listen);
	if (!l->sync)
		return fail(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	if (rdma_get_cm_event(listen->channel, &ev))
		return -1;
	if (ev->event == RDMA_CM_EVENT_REJECTED) {
		ret = fail(ECONNREFUSED);
		goto err;
	}
	if (ev->status) {
		ret = fail(ev->status < 0 ? -ev->status : ev->status);
		goto err;
	}
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		ret = fail(EINVAL);
		goto err;
	}
	if (l->qp_init_attr) {
		struct ibv_qp_init_attr attr = *l->qp_init_attr;

		ret = rdma_create_qp(ev->id, listen->pd, &attr);
		if (ret)
			goto err;
	}
	*id = ev->id;
	(*id)->event = ev;
	return 0;
err:
	listen->event = ev;
	return ret;
}

/* Moves the unretrieved events of p from one channel to another. */
static void move_events(struct cm_id *p, struct cm_channel *from, struct cm_channel *to)
{
	for (struct cm_event *e = from->head, *n; e; e = n) {
		uint64_t one = 1;

		n = e->next;
		if (e->owner != p && e->ev.id != &p->id)
			continue;
		cm_channel_unlink(from, e);
		e->next = NULL;
		*to->tail = e;
		to->tail = &e->next;
		if (write(to->ch.fd, &one, sizeof(one)) != sizeof(one))
			cm_log("channel %d: %s", to->ch.fd, strerror(errno));
	}
}

CM_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct cm_id *p;
	struct cm_channel *to, *from, *old_sync = NULL;

	if (!id)
		return fail(EINVAL);
	p = cm_id_of(id);
	if (p->sync && !channel)
		return fail(EINVAL);
	lock();
	to = channel ? cm_channel_of(channel) : cm_channel_new();
	if (!to) {
		unlock();
		return -1;
	}
	from = cm_channel_of(p->id.channel);
	move_events(p, from, to);
	if (p->sync) {
		if (p->id.event) {
			ack_locked(CM_CONTAINER(p->id.event, struct cm_event, ev));
			p->id.event = NULL;
		}
		old_sync = from;
	}
	p->sync = !channel;
	p->id.channel = &to->ch;
	while (p->acked < p->reported)
		pthread_cond_wait(&p->cond, &cm.lock);
	if (old_sync)
		cm_channel_free(old_sync);
	unlock();
	return 0;
}

/* ---- options ------------------------------------------------------------- */

CM_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
			      size_t optlen)
{
	struct cm_id *p;
	int ret = 0;

	if (!id || !optval)
		return fail(EINVAL);
	p = cm_id_of(id);
	if (level == RDMA_OPTION_IB)
		return fail(optname == RDMA_OPTION_IB_PATH ? EINVAL : ENOSYS);
	if (level != RDMA_OPTION_ID)
		return fail(ENOSYS);
	lock();
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		if (optlen != sizeof(uint8_t)) {
			ret = fail(EINVAL);
			break;
		}
		p->tos = *(uint8_t *)optval;
		p->tos_set = 1;
		break;
	case RDMA_OPTION_ID_REUSEADDR:
		if (optlen != sizeof(int) || (p->state != CM_IDLE && *(int *)optval)) {
			ret = fail(EINVAL);
			break;
		}
		p->reuseaddr = !!*(int *)optval;
		break;
	case RDMA_OPTION_ID_AFONLY:
		if (optlen != sizeof(int) || (p->state != CM_IDLE && p->state != CM_ADDR_BOUND)) {
			ret = fail(EINVAL);
			break;
		}
		p->afonly = !!*(int *)optval;
		p->afonly_set = 1;
		if (p->sock && p->sock->family == AF_INET6) {
			int only = p->afonly;

			setsockopt(p->sock->fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof(only));
		}
		break;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (optlen != sizeof(uint8_t) || p->id.qp_type != IBV_QPT_RC) {
			ret = fail(EINVAL);
			break;
		}
		p->ack_timeout = (uint8_t)CM_MIN(*(uint8_t *)optval, 31);
		p->ack_timeout_set = 1;
		break;
	default:
		ret = fail(ENOSYS);
	}
	unlock();
	return ret;
}

/* ---- QP attributes and QPs ----------------------------------------------- */

static int connected_state(enum cm_state s)
{
	return s == CM_REP_RCVD || s == CM_RESPONSE || s == CM_REQ_RCVD || s == CM_REP_SENT ||
	       s == CM_ESTABLISHED || s == CM_DREQ_SENT || s == CM_DREQ_RCVD || s == CM_TIMEWAIT;
}

CM_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *attr, int *mask)
{
	struct cm_id *p;
	enum ibv_qp_state want;
	int ud, ret = 0;

	if (!id || !attr || !mask)
		return fail(EINVAL);
	p = cm_id_of(id);
	ud = p->id.qp_type == IBV_QPT_UD;
	want = attr->qp_state;
	lock();
	if (!p->dev) {
		unlock();
		return fail(EINVAL);
	}
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = want;
	switch (want) {
	case IBV_QPS_INIT:
		attr->pkey_index = 0;
		attr->port_num = 1;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (ud) {
			attr->qkey = RDMA_UDP_QKEY;
			*mask |= IBV_QP_QKEY;
		} else {
			/* no connection yet: no remote access (as the kernel) */
			if (connected_state(p->state) || p->state == CM_REQ_SENT)
				attr->qp_access_flags =
					IBV_ACCESS_REMOTE_WRITE |
					(p->resp_res ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC : 0);
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		break;
	case IBV_QPS_RTR:
		*mask = IBV_QP_STATE;
		if (ud)
			break;
		if (!connected_state(p->state)) {
			ret = fail(EINVAL);
			break;
		}
		attr->path_mtu = p->mtu;
		attr->dest_qp_num = p->remote_qpn;
		attr->rq_psn = p->remote_psn;
		attr->max_dest_rd_atomic = p->resp_res;
		attr->min_rnr_timer = 0; /* 655 ms, rdma_connect(3) "INFINIBAND SPECIFIC" */
		cm_fill_ud_ah(p, &attr->ah_attr, &p->id.route.addr.addr.ibaddr.dgid);
		*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		break;
	case IBV_QPS_RTS:
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (ud) {
			attr->sq_psn = 0;
			break;
		}
		if (!connected_state(p->state)) {
			ret = fail(EINVAL);
			break;
		}
		attr->sq_psn = p->local_psn;
		attr->timeout = p->ack_timeout_set ? p->ack_timeout : p->timeout;
		attr->retry_cnt = p->retry_count;
		attr->rnr_retry = p->rnr_retry;
		attr->max_rd_atomic = p->init_depth;
		*mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			 IBV_QP_MAX_QP_RD_ATOMIC;
		break;
	default:
		ret = fail(EINVAL);
	}
	unlock();
	return ret;
}

static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq && id->send_cq != id->recv_cq) {
			ibv_destroy_cq(id->send_cq);
			id->send_cq = NULL;
		}
		id->recv_cq = NULL;
	} else if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel) {
			ibv_destroy_comp_channel(id->send_cq_channel);
			id->send_cq_channel = NULL;
		}
		id->recv_cq_channel = NULL;
	} else if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
}

/* CQs (with completion channels) the application did not give. */
static int create_cqs(struct rdma_cm_id *id, uint32_t send_size, uint32_t recv_size)
{
	if (recv_size) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = ibv_create_cq(id->verbs, (int)recv_size, id, id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = ibv_create_cq(id->verbs, (int)send_size, id, id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err:
	{
		int e = errno;

		destroy_cqs(id);
		errno = e;
	}
	return -1;
}

static int modify_with(struct rdma_cm_id *id, struct ibv_qp *qp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a;
	int mask, ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = st;
	if (rdma_init_qp_attr(id, &a, &mask))
		return errno;
	ret = ibv_modify_qp(qp, &a, mask);
	return ret;
}

CM_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp *qp;
	struct ibv_ece ece;
	int ret;

	if (!id || !attr || id->qp || !id->verbs)
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = id->pd;
	} else if (id->verbs != attr->pd->context) {
		return fail(EINVAL);
	}
	if (!attr->pd)
		return fail(EINVAL);
	if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
	    (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
		return fail(EINVAL);
	if (create_cqs(id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
		       attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr))
		return -1;
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (id->srq && !attr->srq)
		attr->srq = id->srq;
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		int e = errno;

		destroy_cqs(id);
		return fail(e);
	}
	memset(&ece, 0, sizeof(ece));
	if (!ibv_query_ece(qp, &ece)) {
		lock();
		cm_id_of(id)->local_ece = ece;
		unlock();
	}
	ret = modify_with(id, qp, IBV_QPS_INIT);
	if (!ret && id->qp_type == IBV_QPT_UD) {
		/* a datagram QP is ready to send at once */
		ret = modify_with(id, qp, IBV_QPS_RTR);
		if (!ret)
			ret = modify_with(id, qp, IBV_QPS_RTS);
	}
	if (ret) {
		ibv_destroy_qp(qp);
		destroy_cqs(id);
		return fail(ret);
	}
	id->pd = qp->pd;
	id->qp = qp;
	return 0;
}

CM_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ax;
	int ret;

	if (!id || !qp_init_attr)
		return fail(EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, qp_init_attr, sizeof(*qp_init_attr));
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	ax.pd = pd ? pd : id->pd;
	ret = rdma_create_qp_ex(id, &ax);
	memcpy(qp_init_attr, &ax, sizeof(*qp_init_attr));
	return ret;
}

CM_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		ibv_destroy_qp(id->qp);
	id->qp = NULL;
	destroy_cqs(id);
}

CM_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq;

	if (!id || !attr || !id->verbs || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (attr->srq_type == IBV_SRQT_XRC)
		return fail(EOPNOTSUPP); /* no XRC domains in uroce */
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq)
		return -1;
	if (!id->pd)
		id->pd = attr->pd;
	id->srq = srq;
	return 0;
}

CM_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			      struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ax;
	int ret;

	if (!id || !attr)
		return fail(EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, attr, sizeof(*attr));
	ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ax.srq_type = IBV_SRQT_BASIC;
	ax.pd = pd;
	ret = rdma_create_srq_ex(id, &ax);
	memcpy(attr, &ax, sizeof(*attr));
	return ret;
}

CM_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->srq)
		ibv_destroy_srq(id->srq);
	id->srq = NULL;
	destroy_cqs(id);
}

/* ---- multicast (UD) ------------------------------------------------------ */

static socklen_t addr_len(const struct sockaddr *sa)
{
	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET)
		return sizeof(struct sockaddr_in);
	if (sa->sa_family == AF_INET6)
		return sizeof(struct sockaddr_in6);
	return 0;
}

static int join(struct rdma_cm_id *id, struct sockaddr *addr, int sendonly, void *context)
{
	struct cm_id *p;
	struct cm_mc *mc;
	struct cm_event *e;
	socklen_t len = addr_len(addr);

	if (!id || !len)
		return fail(EINVAL);
	p = cm_id_of(id);
	lock();
	if ((p->state != CM_ADDR_BOUND && p->state != CM_ADDR_RESOLVED) || !p->dev ||
	    p->id.qp_type != IBV_QPT_UD) {
		unlock();
		return fail(EINVAL);
	}
	mc = calloc(1, sizeof(*mc));
	if (!mc) {
		unlock();
		return fail(ENOMEM);
	}
	mc->id = p;
	mc->context = context;
	mc->sendonly = sendonly;
	memcpy(&mc->addr, addr, len);
	if (addr->sa_family == AF_INET)
		/* RoCEv2: the IPv4-mapped group address (the kernel's
		 * cma_iboe_set_mgid for IB_GID_TYPE_ROCE_UDP_ENCAP) */
		gid_of_ip(&mc->mgid, ((struct sockaddr_in *)addr)->sin_addr.s_addr);
	else
		memcpy(mc->mgid.raw, ((struct sockaddr_in6 *)addr)->sin6_addr.s6_addr, 16);
	mc->next = p->mcs;
	p->mcs = mc;
	e = cm_event_new(p, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
	if (e) {
		e->mc = mc;
		cm_fill_ud_ah(p, &e->ev.param.ud.ah_attr, &mc->mgid);
		e->ev.param.ud.qp_num = 0xffffff;
		e->ev.param.ud.qkey = RDMA_UDP_QKEY;
		e->ev.param.ud.private_data = context;
		cm_queue(p, e);
	}
	unlock();
	return cm_complete_id(p);
}

CM_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return join(id, addr, 0, context);
}

CM_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *a,
				     void *context)
{
	if (!a)
		return fail(EINVAL);
	if (a->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return fail(ENOTSUP);
	if (!(a->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
		return fail(EINVAL);
	if (!(a->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    a->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return fail(EINVAL);
	return join(id, a->addr, a->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, context);
}

CM_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *p;
	struct cm_mc **pp, *mc;
	socklen_t len = addr_len(addr);
	struct cm_channel *ch;

	if (!id || !len)
		return fail(EINVAL);
	p = cm_id_of(id);
	lock();
	for (pp = &p->mcs; *pp; pp = &(*pp)->next)
		if (!memcmp(&(*pp)->addr, addr, len))
			break;
	mc = *pp;
	if (!mc) {
		unlock();
		return fail(EADDRNOTAVAIL);
	}
	*pp = mc->next;
	if (mc->attached && p->id.qp)
		ibv_detach_mcast(p->id.qp, &mc->mgid, 0);
	ch = cm_channel_of(p->id.channel);
	for (struct cm_event *e = ch->head, *n; e; e = n) {
		n = e->next;
		if (e->mc == mc) {
			cm_channel_unlink(ch, e);
			free(e);
		}
	}
	while (mc->acked < mc->reported)
		pthread_cond_wait(&p->cond, &cm.lock);
	unlock();
	free(mc);
	return 0;
}

/* ---- connection requests: the passive side's new id ---------------------- */

struct cm_id *cm_new_conn_id(struct cm_id *l, struct cm_conn *c, const struct cm_msg *m)
{
	struct sockaddr_storage la, pa;
	socklen_t ll = sizeof(la), pl = sizeof(pa);
	uint32_t lip, pip;
	uint16_t lport, pport;
	struct cm_dev *dev;
	struct cm_id *id;
	union ibv_gid dgid;
	int gidx = 0;

	if (getsockname(c->fd, (struct sockaddr *)&la, &ll) ||
	    getpeername(c->fd, (struct sockaddr *)&pa, &pl) ||
	    addr_parse((struct sockaddr *)&la, &lip, &lport) != AF_INET ||
	    addr_parse((struct sockaddr *)&pa, &pip, &pport) != AF_INET)
		return NULL;
	dev = cm_dev_by_ip(lip, &gidx);
	if (!dev)
		return NULL;
	id = cm_id_alloc(l->sync ? NULL : cm_channel_of(l->id.channel), l->id.context, l->id.ps,
			 l->id.qp_type);
	if (!id)
		return NULL;
	cm_id_set_dev(id, dev, gidx);
	set_sin(&id->id.route.addr.src_addr, lip, lport);
	set_sin(&id->id.route.addr.dst_addr, pip, pport);
	gid_of_ip(&dgid, pip);
	/* the traffic class of the REQ's path, unless the listener set one */
	id->tos = l->tos_set ? l->tos : m->traffic_class;
	id->tos_set = l->tos_set;
	cm_fill_route(id, &dgid);
	id->listener = l;
	id->conn = c;
	c->id = id;
	c->listener = NULL;
	c->deadline = 0;
	id->state = CM_REQ_RCVD;
	id->remote_comm = m->local_comm_id;
	if (m->attr == CM_SIDR_REQ)
		return id;
	id->remote_qpn = m->qpn;
	id->remote_psn = m->psn;
	id->remote_srq = m->srq;
	id->flow_control = m->flow_control;
	id->retry_count = m->retry_count;
	id->rnr_retry = m->rnr_retry;
	/* the active side's initiator depth is what it asks us to serve */
	id->req_resp_res = m->init_depth;
	id->req_init_depth = m->resp_res;
	id->resp_res = (uint8_t)CM_MIN(m->init_depth, dev->max_resp_res);
	id->init_depth = (uint8_t)CM_MIN(m->resp_res, dev->max_init_depth);
	id->mtu = m->mtu >= IBV_MTU_256 && m->mtu <= IBV_MTU_4096
			  ? (enum ibv_mtu)CM_MIN((int)m->mtu, (int)dev->active_mtu) : dev->active_mtu;
	id->timeout = m->local_ack_timeout ? m->local_ack_timeout : CM_LOCAL_ACK_TIMEOUT;
	id->remote_ece.vendor_id = m->vendor_id;
	id->remote_ece.options = m->attr_mod;
	return id;
}

/* ---- devices, strings, ports, ECE ---------------------------------------- */

CM_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;

	if (cm_init())
		return NULL;
	lock();
	if (cm_devs_load()) {
		unlock();
		return NULL;
	}
	list = calloc((size_t)cm.ndevs + 1, sizeof(*list));
	if (list) {
		for (int i = 0; i < cm.ndevs; i++)
			list[i] = cm.devs[i].verbs;
		if (num_devices)
			*num_devices = cm.ndevs;
	} else {
		errno = ENOMEM;
	}
	unlock();
	return list;
}

CM_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

CM_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		[RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
		[RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
		[RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
		[RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
		[RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
		[RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
		[RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
		[RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
		[RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
		[RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
		[RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
		[RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
		[RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
		[RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
		[RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
		[RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	if ((unsigned)event < sizeof(names) / sizeof(names[0]) && names[event])
		return names[event];
	return "UNKNOWN EVENT";
}

static __be16 port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return 0;
}

CM_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return port_of(&id->route.addr.src_addr);
}

CM_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return port_of(&id->route.addr.dst_addr);
}

CM_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece || !ece->vendor_id || ece->comp_mask)
		return fail(EINVAL);
	lock();
	cm_id_of(id)->local_ece = *ece;
	unlock();
	return 0;
}

CM_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece)
		return fail(EINVAL);
	lock();
	*ece = cm_id_of(id)->remote_ece;
	ece->comp_mask = 0;
	unlock();
	return 0;
}

/* ---- endpoints (rdma_create_ep(3)) ---------------------------------------- */

CM_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;
	struct cm_id *p;
	int ret;

	if (!id || !res)
		return fail(EINVAL);
	if (create_id(NULL, &cid, NULL, (enum rdma_port_space)res->ai_port_space,
		      (enum ibv_qp_type)res->ai_qp_type))
		return -1;
	p = cm_id_of(cid);
	if (res->ai_flags & RAI_PASSIVE) {
		ret = rdma_bind_addr(cid, res->ai_src_addr);
		if (ret)
			goto err;
		if (pd)
			cid->pd = pd;
		if (qp_init_attr) {
			p->qp_init_attr = malloc(sizeof(*qp_init_attr));
			if (!p->qp_init_attr) {
				ret = fail(ENOMEM);
				goto err;
			}
			*p->qp_init_attr = *qp_init_attr;
			p->qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
		}
		*id = cid;
		return 0;
	}
	ret = rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000);
	if (ret)
		goto err;
	ret = rdma_resolve_route(cid, 2000);
	if (ret)
		goto err;
	if (qp_init_attr) {
		qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
		ret = rdma_create_qp(cid, pd, qp_init_attr);
		if (ret)
			goto err;
	}
	if (res->ai_connect_len) {
		p->connect_pdata = malloc(res->ai_connect_len);
		if (!p->connect_pdata) {
			ret = fail(ENOMEM);
			goto err;
		}
		memcpy(p->connect_pdata, res->ai_connect, res->ai_connect_len);
		p->connect_pdata_len = res->ai_connect_len;
	}
	*id = cid;
	return 0;
err:
	{
		int e = errno;

		rdma_destroy_ep(cid);
		errno = e;
	}
	return ret;
}

CM_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}
