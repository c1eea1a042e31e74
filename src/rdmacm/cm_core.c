/* The CM engine: the background thread, the TCP side channel that carries
 * IBTA CM messages (one 256-byte MAD per message, one TCP connection per CM
 * connection), the connection state machine for received messages, timers,
 * event queues and the device table. docs/rdmacm.md has the design. */
#include "cm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct cm_global cm = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.epfd = -1,
	.wakefd = -1,
};

static pthread_once_t cm_once = PTHREAD_ONCE_INIT;
static int cm_init_errno;
static struct cm_conn *cm_conns; /* every live socket, for their deadlines */
static struct cm_channel *cm_channels; /* every live event channel */
static pthread_mutex_t cm_channels_lock = PTHREAD_MUTEX_INITIALIZER;

static void *cm_thread(void *arg);

void cm_log(const char *fmt, ...)
{
	va_list ap;

	if (!cm.debug)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "uroce-cm[%d]: ", (int)getpid());
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

uint64_t cm_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint32_t cm_rand32(void)
{
	static uint64_t x;
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v;
	x += cm_now() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(x >> 16);
}

uint64_t cm_service_id(enum rdma_port_space ps, uint16_t port)
{
	return ((uint64_t)ps << 16) | port; /* RDMA_IB_IP_PS_TCP | port for RDMA_PS_TCP */
}

static void cm_do_init(void)
{
	const char *t = getenv("UROCE_CM_TIMEOUT_MS");
	const char *l = getenv("UROCE_LOG");
	struct epoll_event ev;
	sigset_t all, old;
	unsigned long long ms = 20000;

	if (t && *t) {
		char *end;

		ms = strtoull(t, &end, 0);
		if (*end || !ms)
			ms = 20000;
	}
	cm.timeout_ns = ms * 1000000ull;
	cm.debug = l && !strcmp(l, "debug");
	cm.epfd = epoll_create1(EPOLL_CLOEXEC);
	cm.wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (cm.epfd < 0 || cm.wakefd < 0) {
		cm_init_errno = errno;
		return;
	}
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.ptr = NULL;
	if (epoll_ctl(cm.epfd, EPOLL_CTL_ADD, cm.wakefd, &ev)) {
		cm_init_errno = errno;
		return;
	}
	/* The thread takes no signals: the application's handlers run on
	 * its own threads, as they would with the kernel's rdma_cm. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	cm_init_errno = pthread_create(&cm.thread, NULL, cm_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!cm_init_errno)
		pthread_detach(cm.thread);
}

int cm_init(void)
{
	pthread_once(&cm_once, cm_do_init);
	if (cm_init_errno) {
		errno = cm_init_errno;
		return -1;
	}
	return 0;
}

void cm_wake(void)
{
	uint64_t one = 1;

	if (write(cm.wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		cm_log("wake: %s", strerror(errno));
}

/* ---- devices ------------------------------------------------------------- */

/* Opens every device once (as librdmacm does in rdma_get_devices); contexts
 * and default PDs live as long as the process. Lock held. */
int cm_devs_load(void)
{
	struct ibv_device **list;
	int n = 0;

	if (cm.devs_loaded)
		return 0;
	list = ibv_get_device_list(&n);
	if (!list)
		return -1;
	cm.devs = calloc((size_t)(n > 0 ? n : 1), sizeof(*cm.devs));
	if (!cm.devs) {
		ibv_free_device_list(list);
		errno = ENOMEM;
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct cm_dev *d = &cm.devs[cm.ndevs];
		struct ibv_device_attr da;
		struct ibv_port_attr pa;

		d->verbs = ibv_open_device(list[i]);
		if (!d->verbs)
			continue;
		if (ibv_query_device(d->verbs, &da) || ibv_query_port(d->verbs, 1, &pa)) {
			ibv_close_device(d->verbs);
			continue;
		}
		d->guid = da.node_guid;
		d->max_resp_res = (uint8_t)CM_MIN(da.max_qp_rd_atom, 255);
		d->max_init_depth = (uint8_t)CM_MIN(da.max_qp_init_rd_atom, 255);
		d->ack_delay = da.local_ca_ack_delay;
		d->max_qp_wr = da.max_qp_wr;
		d->active_mtu = pa.active_mtu;
		for (int g = 0; g < pa.gid_tbl_len && g < 16; g++) {
			union ibv_gid gid;
			static const uint8_t zero[16];

			if (ibv_query_gid(d->verbs, 1, g, &gid) || !memcmp(gid.raw, zero, 16))
				break;
			d->gid[d->ngids++] = gid;
		}
		d->pd = ibv_alloc_pd(d->verbs);
		cm_log("device %s: %d gids, mtu %d", ibv_get_device_name(list[i]), d->ngids,
		       128 << d->active_mtu);
		cm.ndevs++;
	}
	ibv_free_device_list(list);
	cm.devs_loaded = 1;
	return 0;
}

static int gid_is_ip4(const union ibv_gid *g, uint32_t ip)
{
	static const uint8_t pre[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(g->raw, pre, 12) && !memcmp(g->raw + 12, &ip, 4);
}

/* The device whose GID table holds ::ffff:ip (uroce's RoCEv2 GIDs). */
struct cm_dev *cm_dev_by_ip(uint32_t ip, int *gid_index)
{
	if (cm_devs_load())
		return NULL;
	for (int i = 0; i < cm.ndevs; i++)
		for (int g = 0; g < cm.devs[i].ngids; g++)
			if (gid_is_ip4(&cm.devs[i].gid[g], ip)) {
				if (gid_index)
					*gid_index = g;
				return &cm.devs[i];
			}
	return NULL;
}

struct cm_dev *cm_dev_by_verbs(struct ibv_context *verbs)
{
	for (int i = 0; i < cm.ndevs; i++)
		if (cm.devs[i].verbs == verbs)
			return &cm.devs[i];
	return NULL;
}

/* The source address the kernel's routing picks for dst. */
int cm_route_src(uint32_t dst, uint32_t *src)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = 0;

	if (fd < 0)
		return -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = dst;
	sin.sin_port = htons(4791);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    getsockname(fd, (struct sockaddr *)&sin, &len))
		ret = -1;
	else
		*src = sin.sin_addr.s_addr;
	if (ret) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	close(fd);
	return 0;
}

/* ---- events -------------------------------------------------------------- */

struct cm_event *cm_event_new(struct cm_id *owner, enum rdma_cm_event_type type, int status)
{
	struct cm_event *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->owner = owner;
	e->ev.id = &owner->id;
	e->ev.event = type;
	e->ev.status = status;
	return e;
}

/* Appends e to the channel of id and counts it in the channel's eventfd,
 * which therefore polls readable exactly while events are queued. */
void cm_queue(struct cm_id *id, struct cm_event *e)
{
	struct cm_channel *ch = cm_channel_of(id->id.channel);
	uint64_t one = 1;

	e->next = NULL;
	*ch->tail = e;
	ch->tail = &e->next;
	if (write(ch->ch.fd, &one, sizeof(one)) != sizeof(one))
		cm_log("event channel %d: %s", ch->ch.fd, strerror(errno));
	cm_log("event %s status %d for id %p", rdma_event_str(e->ev.event), e->ev.status,
	       (void *)id);
}

/* Takes e (queued on ch) off the queue; the count drops with it. Lock held,
 * so the eventfd's count is at least 1 and the read cannot block. */
void cm_channel_unlink(struct cm_channel *ch, struct cm_event *e)
{
	struct cm_event **pp;
	uint64_t v;

	for (pp = &ch->head; *pp && *pp != e; pp = &(*pp)->next)
		;
	if (!*pp)
		return;
	*pp = e->next;
	if (!*pp)
		ch->tail = pp;
	if (read(ch->ch.fd, &v, sizeof(v)) != sizeof(v))
		cm_log("event channel %d: read %s", ch->ch.fd, strerror(errno));
}

struct cm_channel *cm_channel_new(void)
{
	struct cm_channel *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return NULL;
	ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	ch->tail = &ch->head;
	pthread_mutex_lock(&cm_channels_lock);
	ch->next = cm_channels;
	cm_channels = ch;
	pthread_mutex_unlock(&cm_channels_lock);
	return ch;
}

/* The list link that points at CH, or at the list's end if CH is not
 * listed; compares pointers only, so CH may be freed. Called with
 * cm_channels_lock held. */
static struct cm_channel **channel_link(const struct cm_channel *ch)
{
	struct cm_channel **pp;

	for (pp = &cm_channels; *pp && *pp != ch; pp = &(*pp)->next)
		;
	return pp;
}

/* Whether CH is a channel not yet destroyed (it may be asked of a
 * pointer already freed). */
int cm_channel_live(const struct cm_channel *ch)
{
	int live;

	pthread_mutex_lock(&cm_channels_lock);
	live = *channel_link(ch) != NULL;
	pthread_mutex_unlock(&cm_channels_lock);
	return live;
}

/* A duplicate of a live channel's descriptor, or -1 with EBADF if CH is
 * no channel (any more). Reads the channel only while it is listed, so
 * a pointer already freed is never dereferenced. */
int cm_channel_dup_fd(const struct cm_channel *ch)
{
	const struct cm_channel *c;
	int fd = -1, err = EBADF;

	pthread_mutex_lock(&cm_channels_lock);
	c = *channel_link(ch);
	if (c) {
		fd = fcntl(c->ch.fd, F_DUPFD_CLOEXEC, 0);
		err = errno;
	}
	pthread_mutex_unlock(&cm_channels_lock);
	if (fd < 0)
		errno = err;
	return fd;
}

/* Called with the library's lock held. A thread still waiting in
 * rdma_get_cm_event holds the memory (ch->waiters): the last one frees
 * it on waking, the rest of it gone. */
void cm_channel_free(struct cm_channel *ch)
{
	struct cm_channel **pp;

	pthread_mutex_lock(&cm_channels_lock);
	pp = channel_link(ch);
	if (*pp)
		*pp = ch->next;
	pthread_mutex_unlock(&cm_channels_lock);
	while (ch->head) {
		struct cm_event *e = ch->head;

		ch->head = e->next;
		free(e);
	}
	ch->tail = &ch->head;
	close(ch->ch.fd);
	if (ch->waiters)
		ch->dead = 1;
	else
		free(ch);
}

/* ---- sockets ------------------------------------------------------------- */

struct cm_conn *cm_conn_new(int fd, struct cm_id *id)
{
	struct cm_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->id = id;
	c->next = cm_conns;
	cm_conns = c;
	return c;
}

/* A listener goes: the sockets it accepted that sent no request yet are
 * closed (their peers see what a missing listener gives). Lock held. */
void cm_listener_gone(struct cm_id *l)
{
	for (struct cm_conn *c = cm_conns, *n; c; c = n) {
		n = c->next;
		if (c->listener == l) {
			c->listener = NULL;
			cm_conn_kill(c);
		}
	}
}

static void conn_unlist(struct cm_conn *c)
{
	struct cm_conn **pp;

	for (pp = &cm_conns; *pp && *pp != c; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = c->next;
	c->next = NULL;
}

/* Registers the socket with the epoll set for what it waits for. A bound
 * socket that neither listens nor connects is not registered (a closed TCP
 * socket polls as HUP forever). */
void cm_conn_watch(struct cm_conn *c)
{
	struct epoll_event ev;
	uint32_t want = 0;

	if (c->dead)
		return;
	if (c->listening || c->up || c->closing)
		want = EPOLLIN;
	if (c->connecting || c->out_len)
		want |= EPOLLOUT;
	if (want == c->ev)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.events = want;
	ev.data.ptr = c;
	if (!c->ev)
		epoll_ctl(cm.epfd, EPOLL_CTL_ADD, c->fd, &ev);
	else if (!want)
		epoll_ctl(cm.epfd, EPOLL_CTL_DEL, c->fd, &ev);
	else
		epoll_ctl(cm.epfd, EPOLL_CTL_MOD, c->fd, &ev);
	c->ev = want;
	cm_wake();
}

/* Closes the socket now. The struct stays valid until the CM thread has
 * finished its current batch of epoll events (the graveyard). */
void cm_conn_kill(struct cm_conn *c)
{
	if (c->dead)
		return;
	if (c->ev)
		epoll_ctl(cm.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->dead = 1;
	c->id = NULL;
	conn_unlist(c);
	free(c->out);
	c->out = NULL;
	c->out_len = 0;
	c->next = cm.graveyard;
	cm.graveyard = c;
	cm_wake();
}

static int conn_flush(struct cm_conn *c)
{
	while (c->out_len && !c->connecting) {
		ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			return -errno;
		}
		memmove(c->out, c->out + n, c->out_len - (size_t)n);
		c->out_len -= (size_t)n;
	}
	return 0;
}

int cm_conn_send(struct cm_conn *c, const struct cm_msg *m)
{
	uint8_t mad[CM_MAD_SIZE];

	if (!c || c->dead)
		return -ENOTCONN;
	cm_mad_build(m, mad);
	if (c->out_len + CM_MAD_SIZE > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap * 2 : 4 * CM_MAD_SIZE;
		uint8_t *p;

		while (cap < c->out_len + CM_MAD_SIZE)
			cap *= 2;
		p = realloc(c->out, cap);
		if (!p)
			return -ENOMEM;
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, mad, CM_MAD_SIZE);
	c->out_len += CM_MAD_SIZE;
	cm_log("send %s%s", m->attr == CM_REQ ? "REQ" : m->attr == CM_REP ? "REP" :
	       m->attr == CM_RTU ? "RTU" : m->attr == CM_REJ ? "REJ" : m->attr == CM_MRA ? "MRA" :
	       m->attr == CM_DREQ ? "DREQ" : m->attr == CM_DREP ? "DREP" :
	       m->attr == CM_SIDR_REQ ? "SIDR_REQ" : "SIDR_REP", c->connecting ? " (queued)" : "");
	conn_flush(c);
	cm_conn_watch(c);
	return 0;
}

/* Detaches the socket from its id: it is closed once what was queued on it
 * has gone out (or after the CM timeout). */
void cm_conn_finish(struct cm_conn *c)
{
	if (!c || c->dead)
		return;
	c->id = NULL;
	c->listener = NULL;
	if (!c->out_len && !c->connecting) {
		cm_conn_kill(c);
		return;
	}
	c->closing = 1;
	c->deadline = cm_now() + cm.timeout_ns;
	cm_conn_watch(c);
}

/* ---- the state machine --------------------------------------------------- */

void cm_set_timer(struct cm_id *id, enum cm_timer t, uint64_t ns)
{
	id->timer = t;
	id->deadline = t == CM_T_NONE ? 0 : cm_now() + ns;
	cm_wake();
}

static void msg_init(struct cm_msg *m, struct cm_id *id, uint16_t attr)
{
	memset(m, 0, sizeof(*m));
	m->attr = attr;
	m->tid = (uint64_t)id->local_comm << 32 | attr;
	m->local_comm_id = id->local_comm;
	m->remote_comm_id = id->remote_comm;
}

/* REJ, MRA, RTU, DREQ, DREP and a failure SIDR_REP, with optional private data. */
void cm_send_simple(struct cm_id *id, uint16_t attr, uint16_t reason, const void *pd, size_t len)
{
	struct cm_msg m;

	if (!id->conn)
		return;
	msg_init(&m, id, attr);
	switch (attr) {
	case CM_REJ:
		/* which message is rejected: the REQ, or (active side) the REP */
		m.msg = (id->state == CM_REP_RCVD || id->state == CM_RESPONSE) ? CM_MSG_REP : CM_MSG_REQ;
		m.reason = reason;
		break;
	case CM_MRA:
		m.msg = (uint8_t)reason;
		m.service_timeout = 24; /* 4.096 us * 2^24 = 68 s, as the kernel's rdma_cm */
		break;
	case CM_DREQ:
		m.qpn = id->remote_qpn;
		break;
	case CM_SIDR_REP:
		m.local_comm_id = id->remote_comm; /* the request ID */
		m.status = (uint8_t)reason;
		m.service_id = cm_service_id(id->id.ps, cm_sin_port(&id->id.route.addr.src_addr));
		break;
	}
	if (pd && len)
		memcpy(m.pdata, pd, CM_MIN(len, cm_pdata_size(attr)));
	cm_conn_send(id->conn, &m);
}

/* The connection ended badly: one event, the socket goes. */
void cm_fail(struct cm_id *id, enum rdma_cm_event_type type, int status, const struct cm_msg *m)
{
	struct cm_event *e = cm_event_new(id, type, status);

	id->state = CM_FAILED;
	cm_set_timer(id, CM_T_NONE, 0);
	cm_req_drop(id);
	if (id->conn) {
		cm_conn_finish(id->conn);
		id->conn = NULL;
	}
	if (!e)
		return;
	if (type == RDMA_CM_EVENT_REJECTED && id->id.qp_type != IBV_QPT_UD) {
		/* the REJ's whole private data field, zeros if none came */
		if (m)
			memcpy(e->pdata, m->pdata, CM_REJ_PDATA);
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = CM_REJ_PDATA;
	} else if (m && m->attr == CM_SIDR_REP) {
		memcpy(e->pdata, m->pdata, CM_SIDR_REP_PDATA);
		e->ev.param.ud.private_data = e->pdata;
		e->ev.param.ud.private_data_len = CM_SIDR_REP_PDATA;
	}
	cm_queue(id, e);
}

static int timewait_ms(const struct cm_id *id)
{
	int t = id->timeout > 8 ? id->timeout - 8 : 0;

	return 1 << CM_MIN(t, 14); /* the kernel's cm_convert_to_ms() of the ACK timeout */
}

void cm_enter_timewait(struct cm_id *id)
{
	id->state = CM_TIMEWAIT;
	if (id->conn) {
		cm_conn_finish(id->conn);
		id->conn = NULL;
	}
	cm_set_timer(id, CM_T_TIMEWAIT, (uint64_t)timewait_ms(id) * 1000000ull);
}

static void queue_simple(struct cm_id *id, enum rdma_cm_event_type type, int status)
{
	struct cm_event *e = cm_event_new(id, type, status);

	if (e)
		cm_queue(id, e);
}

/* ---- the active side's request ------------------------------------------ */

/* The REQ (SIDR_REQ) is no longer needed: the id left CM_REQ_SENT or goes. */
void cm_req_drop(struct cm_id *id)
{
	free(id->req);
	id->req = NULL;
}

/* A socket for the request of id, bound as its first one was (id->req_src,
 * from connect_and_send): the same address and port, which the REQ's
 * rdma_cm header names and the passive side reports. Returns the fd, or
 * -1 with errno. */
int cm_req_socket(struct cm_id *id)
{
	int fd = socket(id->req_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&id->req_src, id->req_src_len)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Connects c (from cm_req_socket, or the id's bound socket) to the id's
 * destination and queues the kept request on it. Lock held. */
void cm_req_connect(struct cm_id *id, struct cm_conn *c)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct sockaddr_storage ss;
	socklen_t len;
	uint32_t dip = cm_sin_ip(&id->id.route.addr.dst_addr);
	uint16_t dport = cm_sin_port(&id->id.route.addr.dst_addr);

	memset(&ss, 0, sizeof(ss));
	if (c->family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		memcpy(s6->sin6_addr.s6_addr, v4mapped, 12);
		memcpy(s6->sin6_addr.s6_addr + 12, &dip, 4);
		s6->sin6_port = htons(dport);
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = dip;
		s4->sin_port = htons(dport);
		len = sizeof(*s4);
	}
	id->conn = c;
	c->up = 1;
	cm_log("id %p: connecting to port %u", (void *)id, dport);
	id->state = CM_REQ_SENT;
	cm_set_timer(id, CM_T_REQ, cm.timeout_ns);
	if (connect(c->fd, (struct sockaddr *)&ss, len)) {
		if (errno != EINPROGRESS) {
			cm_conn_error(c, errno);
			return;
		}
		c->connecting = 1;
	}
	cm_conn_send(c, id->req);
}

/* What a request that found nobody reports. */
static void req_no_listener(struct cm_id *id)
{
	if (id->id.qp_type == IBV_QPT_UD)
		/* no listener answered the SIDR_REQ: unsupported service ID */
		cm_fail(id, RDMA_CM_EVENT_UNREACHABLE, CM_SIDR_UNSUPPORTED, NULL);
	else
		/* refused or reset before an MRA: nobody listens there
		 * (IB_CM_REJ_INVALID_SERVICE_ID, what the kernel's CM
		 * answers); after the MRA the listener's process went
		 * away, whose CM would have sent a consumer REJ. */
		cm_fail(id, RDMA_CM_EVENT_REJECTED,
			id->mra_rcvd ? CM_REJ_CONSUMER_DEFINED : CM_REJ_INVALID_SERVICE_ID, NULL);
}

/* The request's connection was refused, reset or closed before any answer:
 * send it again a little later while the window lasts (CM_REQ_RESEND_*,
 * IBA 12.6, 12.7: an unanswered REQ is retransmitted). Returns 0 when a
 * resend is scheduled. */
static int req_resend_later(struct cm_id *id, int err)
{
	uint64_t now = cm_now(), ns;

	if (id->mra_rcvd || !id->req || now >= id->req_resend_end ||
	    (err && err != ECONNREFUSED && err != ECONNRESET))
		return -1;
	ns = (uint64_t)id->req_resend_ms * 1000000ull;
	if (ns > id->req_resend_end - now)
		ns = id->req_resend_end - now; /* the last try at the window's end */
	id->req_resend_ms *= 2;
	cm_log("id %p: request %s, sent again in %llu ms", (void *)id,
	       err ? strerror(err) : "closed", (unsigned long long)(ns / 1000000));
	cm_set_timer(id, CM_T_REQ_RESEND, ns);
	return 0;
}

/* CM_T_REQ_RESEND: the request on a new connection. */
static void req_resend(struct cm_id *id)
{
	struct cm_conn *c;
	int fd;

	cm_set_timer(id, CM_T_NONE, 0);
	fd = cm_req_socket(id);
	if (fd < 0) {
		cm_log("id %p: request socket: %s", (void *)id, strerror(errno));
		req_no_listener(id);
		return;
	}
	c = cm_conn_new(fd, id);
	if (!c) {
		close(fd);
		req_no_listener(id);
		return;
	}
	c->family = id->req_family;
	cm_req_connect(id, c);
}

/* The socket of a connection closed or failed (err 0: end of file). */
static void conn_lost(struct cm_id *id, int err)
{
	cm_log("connection of id %p lost in state %d: %s", (void *)id, id->state,
	       err ? strerror(err) : "EOF");
	id->conn = NULL;
	switch (id->state) {
	case CM_REQ_SENT:
		if (err == EHOSTUNREACH || err == ENETUNREACH || err == ETIMEDOUT)
			cm_fail(id, RDMA_CM_EVENT_UNREACHABLE, -err, NULL);
		else if (req_resend_later(id, err))
			req_no_listener(id);
		break;
	case CM_REP_RCVD:
	case CM_RESPONSE:
	case CM_REP_SENT:
		cm_fail(id, RDMA_CM_EVENT_REJECTED, CM_REJ_CONSUMER_DEFINED, NULL);
		break;
	case CM_REQ_RCVD:
		if (id->id.qp_type == IBV_QPT_UD)
			id->state = CM_FAILED;
		else
			/* the active side gave up: its CM rejects with "timeout" */
			cm_fail(id, RDMA_CM_EVENT_REJECTED, CM_REJ_TIMEOUT, NULL);
		break;
	case CM_ESTABLISHED:
		/* end of file is the peer's DREQ */
		id->state = CM_DREQ_RCVD;
		queue_simple(id, RDMA_CM_EVENT_DISCONNECTED, 0);
		break;
	case CM_DREQ_SENT:
		queue_simple(id, RDMA_CM_EVENT_DISCONNECTED, 0);
		cm_enter_timewait(id);
		break;
	default:
		break;
	}
}

void cm_conn_error(struct cm_conn *c, int err)
{
	struct cm_id *id = c->id;

	cm_conn_kill(c);
	if (id && id->conn == c)
		conn_lost(id, err);
}

static void fill_conn_param(struct cm_event *e, const struct cm_msg *m, size_t pd_off,
			    size_t pd_len)
{
	struct rdma_conn_param *p = &e->ev.param.conn;

	memcpy(e->pdata, m->pdata + pd_off, pd_len);
	p->private_data = e->pdata;
	p->private_data_len = (uint8_t)pd_len;
	/* what the peer asks of us: its initiator depth is our responder
	 * resources and the other way round (rdma_get_cm_event(3)) */
	p->responder_resources = m->init_depth;
	p->initiator_depth = m->resp_res;
	p->flow_control = m->flow_control;
	p->retry_count = m->retry_count;
	p->rnr_retry_count = m->rnr_retry;
	p->srq = m->srq;
	p->qp_num = m->qpn;
}

/* A REQ or SIDR_REQ on a socket a listener accepted. */
static void rx_request(struct cm_conn *c, const struct cm_msg *m)
{
	struct cm_id *l = c->listener, *id;
	int ud = m->attr == CM_SIDR_REQ;
	uint16_t port = (uint16_t)(m->service_id & 0xffff);
	enum rdma_port_space ps = (enum rdma_port_space)((m->service_id >> 16) & 0xffff);
	struct cm_event *e;
	struct cm_msg r;

	memset(&r, 0, sizeof(r));
	if (!l || l->state != CM_LISTEN || l->destroying || ps != l->id.ps ||
	    port != cm_sin_port(&l->id.route.addr.src_addr) ||
	    ud != (l->id.qp_type == IBV_QPT_UD) || cm_hdr_check(m->pdata) ||
	    !(id = cm_new_conn_id(l, c, m))) {
		/* nobody listens for this service ID here */
		r.attr = ud ? CM_SIDR_REP : CM_REJ;
		r.tid = m->tid;
		if (ud) {
			r.local_comm_id = m->local_comm_id;
			r.status = CM_SIDR_UNSUPPORTED;
			r.service_id = m->service_id;
		} else {
			r.remote_comm_id = m->local_comm_id;
			r.local_comm_id = cm_rand32();
			r.msg = CM_MSG_REQ;
			r.reason = CM_REJ_INVALID_SERVICE_ID;
		}
		cm_log("request for service 0x%llx refused", (unsigned long long)m->service_id);
		cm_conn_send(c, &r);
		cm_conn_finish(c);
		return;
	}
	e = cm_event_new(l, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e) {
		cm_fail(id, RDMA_CM_EVENT_REJECTED, 0, NULL);
		return;
	}
	e->conn_id = id;
	e->ev.id = &id->id;
	e->ev.listen_id = &l->id;
	if (ud) {
		memcpy(e->pdata, m->pdata + CM_CMA_HDR, CM_SIDR_REQ_PDATA - CM_CMA_HDR);
		e->ev.param.ud.private_data = e->pdata;
		e->ev.param.ud.private_data_len = CM_SIDR_REQ_PDATA - CM_CMA_HDR;
		/* where the requester is (its QP number is not in a SIDR_REQ) */
		cm_fill_ud_ah(id, &e->ev.param.ud.ah_attr, &id->id.route.addr.addr.ibaddr.dgid);
		e->ev.param.ud.qkey = RDMA_UDP_QKEY;
	} else {
		fill_conn_param(e, m, CM_CMA_HDR, CM_REQ_PDATA - CM_CMA_HDR);
	}
	cm_queue(l, e);
	/* The request reached its consumer: tell the active side to wait for
	 * the application rather than time out (the kernel's rdma_cm does the
	 * same with an MRA). */
	if (!ud)
		cm_send_simple(id, CM_MRA, CM_MSG_REQ, NULL, 0);
}

static void rx_rep(struct cm_id *id, const struct cm_msg *m)
{
	struct cm_event *e;

	id->remote_comm = m->local_comm_id;
	id->remote_qpn = m->qpn;
	id->remote_psn = m->psn;
	id->remote_srq = m->srq;
	/* the REP's responder resources bound how many reads we may issue */
	id->init_depth = (uint8_t)CM_MIN(m->resp_res, id->dev->max_init_depth);
	id->resp_res = (uint8_t)CM_MIN(m->init_depth, id->dev->max_resp_res);
	id->rnr_retry = m->rnr_retry;
	id->remote_ece.vendor_id = m->vendor_id;
	id->remote_ece.options = m->attr_mod;
	id->state = CM_REP_RCVD;
	cm_set_timer(id, CM_T_NONE, 0);
	cm_req_drop(id);
	/* our application may take its time to retrieve the event */
	cm_send_simple(id, CM_MRA, CM_MSG_REP, NULL, 0);
	e = cm_event_new(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
	if (!e)
		return;
	e->internal = CM_EV_REP;
	fill_conn_param(e, m, 0, CM_REP_PDATA);
	e->ev.param.conn.retry_count = 0;
	cm_queue(id, e);
}

static void rx_sidr_rep(struct cm_id *id, const struct cm_msg *m)
{
	struct cm_event *e;
	union ibv_gid dgid = id->id.route.addr.addr.ibaddr.dgid;

	if (m->status != CM_SIDR_SUCCESS) {
		cm_fail(id, RDMA_CM_EVENT_UNREACHABLE, m->status, m);
		return;
	}
	id->state = CM_UD_DONE;
	cm_set_timer(id, CM_T_NONE, 0);
	cm_req_drop(id);
	if (id->conn) {
		cm_conn_finish(id->conn);
		id->conn = NULL;
	}
	e = cm_event_new(id, RDMA_CM_EVENT_ESTABLISHED, 0);
	if (!e)
		return;
	memcpy(e->pdata, m->pdata, CM_SIDR_REP_PDATA);
	e->ev.param.ud.private_data = e->pdata;
	e->ev.param.ud.private_data_len = CM_SIDR_REP_PDATA;
	e->ev.param.ud.qp_num = m->qpn;
	e->ev.param.ud.qkey = m->qkey;
	cm_fill_ud_ah(id, &e->ev.param.ud.ah_attr, &dgid);
	cm_queue(id, e);
}

/* One message on the connection of an id. */
static void rx_conn(struct cm_id *id, const struct cm_msg *m)
{
	if (m->attr != CM_REP && m->attr != CM_SIDR_REP && m->attr != CM_REJ &&
	    m->remote_comm_id != id->local_comm) {
		cm_log("message 0x%x for comm id 0x%x, ours is 0x%x: dropped", m->attr,
		       m->remote_comm_id, id->local_comm);
		return;
	}
	switch (m->attr) {
	case CM_MRA:
		if (id->state == CM_REQ_SENT && m->msg == CM_MSG_REQ) {
			id->mra_rcvd = 1;
			cm_set_timer(id, CM_T_NONE, 0);
		} else if (id->state == CM_REP_SENT && m->msg == CM_MSG_REP) {
			cm_set_timer(id, CM_T_NONE, 0);
		}
		break;
	case CM_REP:
		if (id->state == CM_REQ_SENT && id->id.qp_type != IBV_QPT_UD &&
		    m->remote_comm_id == id->local_comm)
			rx_rep(id, m);
		break;
	case CM_SIDR_REP:
		if (id->state == CM_REQ_SENT && id->id.qp_type == IBV_QPT_UD &&
		    m->local_comm_id == id->local_comm)
			rx_sidr_rep(id, m);
		break;
	case CM_REJ:
		if (m->remote_comm_id != id->local_comm)
			break;
		if (id->state == CM_REQ_SENT || id->state == CM_REP_SENT ||
		    id->state == CM_REP_RCVD || id->state == CM_RESPONSE)
			cm_fail(id, RDMA_CM_EVENT_REJECTED, m->reason, m);
		break;
	case CM_RTU:
		if (id->state == CM_REP_SENT) {
			id->state = CM_ESTABLISHED;
			cm_set_timer(id, CM_T_NONE, 0);
			queue_simple(id, RDMA_CM_EVENT_ESTABLISHED, 0);
		}
		break;
	case CM_DREQ:
		if (id->state == CM_ESTABLISHED || id->state == CM_REP_SENT) {
			id->state = CM_DREQ_RCVD;
			cm_set_timer(id, CM_T_NONE, 0);
			queue_simple(id, RDMA_CM_EVENT_DISCONNECTED, 0);
		} else if (id->state == CM_DREQ_SENT) {
			/* both sides disconnect at once */
			cm_send_simple(id, CM_DREP, 0, NULL, 0);
			queue_simple(id, RDMA_CM_EVENT_DISCONNECTED, 0);
			cm_enter_timewait(id);
		}
		break;
	case CM_DREP:
		if (id->state == CM_DREQ_SENT) {
			queue_simple(id, RDMA_CM_EVENT_DISCONNECTED, 0);
			cm_enter_timewait(id);
		}
		break;
	default:
		break;
	}
}

static void conn_readable(struct cm_conn *c)
{
	while (!c->dead) {
		ssize_t n = recv(c->fd, c->in + c->in_len, CM_MAD_SIZE - c->in_len, MSG_DONTWAIT);
		struct cm_msg m;

		if (n == 0) {
			cm_conn_error(c, 0);
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			cm_conn_error(c, errno);
			return;
		}
		c->in_len += (size_t)n;
		if (c->in_len < CM_MAD_SIZE)
			continue;
		c->in_len = 0;
		if (c->closing)
			continue;
		if (cm_mad_parse(c->in, &m)) {
			/* not a CM peer (a plain TCP program on that port) */
			cm_log("malformed CM message on fd %d", c->fd);
			cm_conn_error(c, EPROTO);
			return;
		}
		if (c->id)
			rx_conn(c->id, &m);
		else if (c->listener && (m.attr == CM_REQ || m.attr == CM_SIDR_REQ))
			rx_request(c, &m);
		else
			cm_conn_kill(c);
	}
}

static void conn_event(struct cm_conn *c, uint32_t events)
{
	if (c->listening) {
		for (;;) {
			int one = 1, fd = accept4(c->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			struct cm_conn *nc;

			if (fd < 0)
				break;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			nc = cm_conn_new(fd, NULL);
			if (!nc) {
				close(fd);
				continue;
			}
			nc->listener = c->id;
			nc->up = 1;
			nc->deadline = cm_now() + cm.timeout_ns;
			cm_conn_watch(nc);
		}
		return;
	}
	if (c->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			cm_conn_error(c, err);
			return;
		}
		c->connecting = 0;
	}
	if (events & EPOLLOUT) {
		int ret = conn_flush(c);

		if (ret) {
			cm_conn_error(c, -ret);
			return;
		}
		if (c->closing && !c->out_len) {
			cm_conn_kill(c);
			return;
		}
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		conn_readable(c);
	if (!c->dead)
		cm_conn_watch(c);
}

static void run_timers(void)
{
	uint64_t now = cm_now();

	for (struct cm_id *id = cm.ids; id; id = id->next) {
		if (id->timer == CM_T_NONE || id->deadline > now)
			continue;
		switch (id->timer) {
		case CM_T_REQ:
			cm_log("id %p: no answer to the request", (void *)id);
			cm_fail(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
			break;
		case CM_T_REQ_RESEND:
			req_resend(id);
			break;
		case CM_T_RTU:
			cm_send_simple(id, CM_REJ, CM_REJ_TIMEOUT, NULL, 0);
			cm_fail(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
			break;
		case CM_T_DREQ:
			queue_simple(id, RDMA_CM_EVENT_DISCONNECTED, -ETIMEDOUT);
			cm_enter_timewait(id);
			break;
		case CM_T_TIMEWAIT:
			cm_set_timer(id, CM_T_NONE, 0);
			id->state = CM_DISCONNECTED;
			queue_simple(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
			break;
		default:
			cm_set_timer(id, CM_T_NONE, 0);
			break;
		}
	}
	for (struct cm_conn *c = cm_conns, *n; c; c = n) {
		n = c->next;
		if (!c->id && c->deadline && c->deadline <= now)
			cm_conn_kill(c);
	}
}

static int next_timeout_ms(void)
{
	uint64_t now = cm_now(), next = UINT64_MAX;

	for (struct cm_id *id = cm.ids; id; id = id->next)
		if (id->timer != CM_T_NONE && id->deadline < next)
			next = id->deadline;
	for (struct cm_conn *c = cm_conns; c; c = c->next)
		if (!c->id && c->deadline && c->deadline < next)
			next = c->deadline;
	if (next == UINT64_MAX)
		return -1;
	if (next <= now)
		return 0;
	return (int)CM_MIN((next - now + 999999) / 1000000, 60000ull);
}

static void *cm_thread(void *arg)
{
	struct epoll_event evs[64];

	(void)arg;
	for (;;) {
		int ms, n;

		pthread_mutex_lock(&cm.lock);
		ms = next_timeout_ms();
		pthread_mutex_unlock(&cm.lock);
		n = epoll_wait(cm.epfd, evs, 64, ms);
		pthread_mutex_lock(&cm.lock);
		for (int i = 0; i < n; i++) {
			struct cm_conn *c = evs[i].data.ptr;

			if (!c) {
				uint64_t v;

				if (read(cm.wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					cm_log("wakefd: %s", strerror(errno));
				continue;
			}
			if (!c->dead)
				conn_event(c, evs[i].events);
		}
		run_timers();
		while (cm.graveyard) {
			struct cm_conn *c = cm.graveyard;

			cm.graveyard = c->next;
			free(c);
		}
		pthread_mutex_unlock(&cm.lock);
	}
	return NULL;
}
