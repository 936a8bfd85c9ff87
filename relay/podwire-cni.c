/*
 * podwire-cni: the CNI plugin that container runtimes execute. It does no networking itself: it relays
 * the call to the podwire agent over the agent's unix socket and prints the agent's answer. Starting
 * Node.js per call would cost more than a whole reference ADD (docs/architecture.md, "Performance").
 *
 * Protocol, one connection per call:
 *   request   u32 big-endian N, then N bytes: "KEY=VALUE\0" for every CNI_* environment variable,
 *             then the stdin bytes (the network config) up to shutdown(SHUT_WR).
 *   response  one byte, the exit status; then the bytes to print on stdout verbatim, up to EOF.
 *
 * The relay answers by itself only when it cannot get an answer: a CNI error object on stdout and
 * exit status 1. Code 11 ("try again later") when the agent is unreachable, times out, is not root
 * at the socket or closes without an answer (50 for STATUS in each case, decision 4); 7 for a config
 * it cannot relay (too large, bad "socket"); 6 for a config that is not JSON; 5 for local I/O
 * failures; 100 for an answer that breaks the protocol. A whole conflist on stdin (a top-level
 * "plugins" array) is refused with 7: runtimes pass each plugin its own entry. Its error objects and
 * VERSION answer end with a newline, and carry the config's cniVersion only when podwire speaks it.
 *
 * Runtimes pass no arguments; `--help` or `version` on the command line (a person at a shell) prints
 * usage or the versions and exits 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

#define STDIN_MAX (1u << 20)
#define ANSWER_MAX (16u << 20)
#ifndef AGENT_TIMEOUT_S /* overridable only so that a test can build a relay that gives up quickly */
#define AGENT_TIMEOUT_S 120
#endif
#define DEFAULT_SOCKET "/run/podwire/cni.sock"
#define DEFAULT_CNI_VERSION "1.1.0"
/* Longest "socket" or "cniVersion" value kept, NUL included; a socket path is far shorter anyway. */
#define FIELD_MAX 256
/* Deepest nesting the scanner follows; real network configs nest a handful of levels. */
#define DEPTH_MAX 512

enum {
	CNI_ERR_IO = 5,
	CNI_ERR_DECODE = 6,
	CNI_ERR_INVALID_CONFIG = 7,
	CNI_ERR_TRY_AGAIN = 11,
	CNI_ERR_NOT_AVAILABLE = 50,
	CNI_ERR_INTERNAL = 100,
};

/* Must equal SUPPORTED_VERSIONS in src/cni/versions.ts (test/agent/commands.test.ts compares them). */
static const char *const SUPPORTED_VERSIONS[] = {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};
#define N_SUPPORTED (sizeof(SUPPORTED_VERSIONS) / sizeof(SUPPORTED_VERSIONS[0]))

/* The config's "cniVersion" once the scanner has seen it (what VERSION is asked for). */
static char cni_version[FIELD_MAX] = DEFAULT_CNI_VERSION;

/* The supported version equal to v, or NULL. */
static const char *supported_version(const char *v)
{
	for (size_t i = 0; i < N_SUPPORTED; i++)
		if (strcmp(v, SUPPORTED_VERSIONS[i]) == 0)
			return SUPPORTED_VERSIONS[i];
	return NULL;
}

/* ---- output ------------------------------------------------------------------------------------ */

/* Writes all of buf, retrying partial writes and EINTR. Returns 0, or -1 with errno set. */
static int write_all(int fd, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A bounded output buffer. Invariant: every caller's total is below its size (see fail()). */
struct out {
	char buf[8192];
	size_t len;
};

static void out_bytes(struct out *o, const char *s, size_t n)
{
	if (n > sizeof(o->buf) - o->len)
		n = sizeof(o->buf) - o->len;
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

static void out_str(struct out *o, const char *s)
{
	out_bytes(o, s, strlen(s));
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629, table 3-7 of Unicode), or 0. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t len;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c == 0xe0)
		len = 3, lo = 0xa0;
	else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef)
		len = 3;
	else if (c == 0xed)
		len = 3, hi = 0x9f;
	else if (c == 0xf0)
		len = 4, lo = 0x90;
	else if (c >= 0xf1 && c <= 0xf3)
		len = 4;
	else if (c == 0xf4)
		len = 4, hi = 0x8f;
	else
		return 0;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* Appends s as a JSON string literal; bytes that are not valid UTF-8 become U+FFFD. */
static void out_json_string(struct out *o, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	out_str(o, "\"");
	while (n > 0) {
		unsigned char c = *p;
		char esc[8];
		size_t len = 1;
		if (c == '"' || c == '\\') {
			esc[0] = '\\', esc[1] = (char)c;
			out_bytes(o, esc, 2);
		} else if (c == '\n') {
			out_str(o, "\\n");
		} else if (c == '\t') {
			out_str(o, "\\t");
		} else if (c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			out_str(o, esc);
		} else if (c < 0x80) {
			out_bytes(o, (const char *)p, 1);
		} else if ((len = utf8_seq_len(p, n)) > 0) {
			out_bytes(o, (const char *)p, len);
		} else {
			len = 1;
			out_str(o, "\\ufffd");
		}
		p += len;
		n -= len;
	}
	out_str(o, "\"");
}

/*
 * Prints {"cniVersion":..,"code":..,"msg":..} and a newline on stdout, the message on stderr, and exits
 * 1. The version is the config's when podwire speaks it, else the latest: an error must not claim a
 * version podwire does not implement (the one it may be refusing). Sizes: the message is < 1024 bytes,
 * so even escaped six-fold it fits.
 */
__attribute__((noreturn, format(printf, 2, 3))) static void fail(int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	struct out o = {.len = 0};
	char num[16];
	const char *version = supported_version(cni_version);
	out_str(&o, "{\"cniVersion\":");
	out_json_string(&o, version ? version : DEFAULT_CNI_VERSION);
	snprintf(num, sizeof(num), "%d", code);
	out_str(&o, ",\"code\":");
	out_str(&o, num);
	out_str(&o, ",\"msg\":");
	out_json_string(&o, msg);
	out_str(&o, "}\n");
	if (write_all(STDOUT_FILENO, o.buf, o.len) < 0)
		dprintf(STDERR_FILENO, "podwire-cni: writing the error to stdout: %s\n", strerror(errno));
	dprintf(STDERR_FILENO, "podwire-cni: %s\n", msg);
	exit(1);
}

/* ---- the network config: just enough JSON to find "socket" and "cniVersion" -------------------- */

/* A decoded string. `overflow`: longer than the buffer; `escaped_u`: contained a \u escape. */
struct field {
	char buf[FIELD_MAX];
	size_t len;
	int overflow, escaped_u;
};

struct scanner {
	const unsigned char *start, *p, *end;
	const char *err;  /* set, with p at the fault, when scanning fails */
	struct field key; /* the top-level key being scanned */
};

static int scan_fail(struct scanner *sc, const char *err)
{
	sc->err = err;
	return -1;
}

static void skip_ws(struct scanner *sc)
{
	while (sc->p < sc->end && (*sc->p == ' ' || *sc->p == '\t' || *sc->p == '\n' || *sc->p == '\r'))
		sc->p++;
}

static int is_hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/*
 * Scans the string starting at the opening quote. When f is not NULL, decodes the simple escapes into
 * it; a \u escape is validated and only flagged, since neither field we read needs one.
 */
static int scan_string(struct scanner *sc, struct field *f)
{
	sc->p++; /* opening quote */
	if (f)
		f->len = 0, f->overflow = 0, f->escaped_u = 0;
	for (;;) {
		if (sc->p >= sc->end)
			return scan_fail(sc, "unterminated string");
		unsigned char c = *sc->p++;
		if (c == '"')
			break;
		if (c < 0x20)
			return scan_fail(sc, "control character in a string");
		if (c == '\\') {
			if (sc->p >= sc->end)
				return scan_fail(sc, "unterminated string");
			unsigned char e = *sc->p++;
			switch (e) {
			case '"': case '\\': case '/': c = e; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			case 'u':
				if (sc->end - sc->p < 4 || !is_hex(sc->p[0]) || !is_hex(sc->p[1]) || !is_hex(sc->p[2]) ||
				    !is_hex(sc->p[3]))
					return scan_fail(sc, "bad \\u escape");
				sc->p += 4;
				if (f)
					f->escaped_u = 1;
				continue;
			default:
				return scan_fail(sc, "bad escape in a string");
			}
		}
		if (f) {
			if (f->len + 1 < sizeof(f->buf))
				f->buf[f->len++] = (char)c;
			else
				f->overflow = 1;
		}
	}
	if (f)
		f->buf[f->len] = '\0';
	return 0;
}

static int scan_digits(struct scanner *sc)
{
	const unsigned char *from = sc->p;
	while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9')
		sc->p++;
	return sc->p > from ? 0 : scan_fail(sc, "bad number");
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int scan_number(struct scanner *sc)
{
	if (*sc->p == '-')
		sc->p++;
	if (sc->p < sc->end && *sc->p == '0')
		sc->p++;
	else if (scan_digits(sc) < 0)
		return -1;
	if (sc->p < sc->end && *sc->p == '.') {
		sc->p++;
		if (scan_digits(sc) < 0)
			return -1;
	}
	if (sc->p < sc->end && (*sc->p == 'e' || *sc->p == 'E')) {
		sc->p++;
		if (sc->p < sc->end && (*sc->p == '+' || *sc->p == '-'))
			sc->p++;
		if (scan_digits(sc) < 0)
			return -1;
	}
	return 0;
}

static int scan_literal(struct scanner *sc, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(sc->end - sc->p) < n || memcmp(sc->p, word, n) != 0)
		return scan_fail(sc, "unexpected character");
	sc->p += n;
	return 0;
}

static int scan_object(struct scanner *sc, int depth);

static int scan_array(struct scanner *sc, int depth);

/* Scans (validates and skips) any value; sc->p is on its first byte. */
static int scan_value(struct scanner *sc, int depth)
{
	if (sc->p >= sc->end)
		return scan_fail(sc, "unexpected end of input");
	switch (*sc->p) {
	case '"': return scan_string(sc, NULL);
	case '{': return scan_object(sc, depth + 1);
	case '[': return scan_array(sc, depth + 1);
	case 't': return scan_literal(sc, "true");
	case 'f': return scan_literal(sc, "false");
	case 'n': return scan_literal(sc, "null");
	default:
		if (*sc->p == '-' || (*sc->p >= '0' && *sc->p <= '9'))
			return scan_number(sc);
		return scan_fail(sc, "unexpected character");
	}
}

static int scan_array(struct scanner *sc, int depth)
{
	if (depth > DEPTH_MAX)
		return scan_fail(sc, "nested too deeply");
	sc->p++;
	skip_ws(sc);
	if (sc->p < sc->end && *sc->p == ']') {
		sc->p++;
		return 0;
	}
	for (;;) {
		if (scan_value(sc, depth) < 0)
			return -1;
		skip_ws(sc);
		if (sc->p < sc->end && *sc->p == ']') {
			sc->p++;
			return 0;
		}
		if (sc->p >= sc->end || *sc->p != ',')
			return scan_fail(sc, "expected ',' or ']'");
		sc->p++;
		skip_ws(sc);
	}
}

/*
 * The agent socket named by the config's top-level "socket", once the scanner has seen it. A bad value
 * is reported only after the whole object is scanned, so that the error carries its "cniVersion".
 */
static struct {
	struct field socket;
	int has_socket;
	const char *socket_err;
	/* A top-level "plugins" array: a whole network list, which no runtime passes to a plugin. */
	int is_list;
} config;

#define SUN_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)
_Static_assert(SUN_PATH_MAX == 107, "the message below names the Linux sun_path limit");

/*
 * Reads the value of a top-level key that matters to the relay; any other value is only scanned. A key
 * spelled with \u escapes ("sock\u0065t") is not recognized: no runtime writes one.
 */
static int scan_member(struct scanner *sc, const struct field *key)
{
	struct field value;
	int is_socket = !key->overflow && !key->escaped_u && strcmp(key->buf, "socket") == 0;
	int is_version = !key->overflow && !key->escaped_u && strcmp(key->buf, "cniVersion") == 0;
	if (!key->overflow && !key->escaped_u && strcmp(key->buf, "plugins") == 0 && sc->p < sc->end &&
	    *sc->p == '[')
		config.is_list = 1;
	if (!is_socket && !is_version)
		return scan_value(sc, 0);
	if (sc->p >= sc->end || *sc->p != '"') {
		if (is_socket)
			config.socket_err = "network config field \"socket\" must be a string";
		return scan_value(sc, 0); /* the agent reports a non-string cniVersion */
	}
	if (scan_string(sc, &value) < 0)
		return -1;
	if (is_version) {
		/* Only used to label the relay's own errors: keep the default for odd values. */
		if (!value.overflow && !value.escaped_u)
			memcpy(cni_version, value.buf, value.len + 1);
		return 0;
	}
	/* A repeated key: the last one wins, as in JSON.parse. */
	config.socket_err = NULL;
	if (value.escaped_u)
		config.socket_err = "network config field \"socket\": \\u escapes are not supported";
	else if (value.len == 0)
		config.socket_err = "network config field \"socket\" is empty";
	else if (value.buf[0] != '/') /* relative: it would resolve against the runtime's cwd */
		config.socket_err = "network config field \"socket\" must be an absolute path";
	else if (value.overflow || value.len > SUN_PATH_MAX)
		config.socket_err = "network config field \"socket\" is longer than a unix socket path (107 bytes)";
	config.socket = value;
	config.has_socket = 1;
	return 0;
}

/* Scans an object; at depth 0 (the top level) its members are inspected. */
static int scan_object(struct scanner *sc, int depth)
{
	if (depth > DEPTH_MAX)
		return scan_fail(sc, "nested too deeply");
	sc->p++;
	skip_ws(sc);
	if (sc->p < sc->end && *sc->p == '}') {
		sc->p++;
		return 0;
	}
	for (;;) {
		if (sc->p >= sc->end || *sc->p != '"')
			return scan_fail(sc, "expected a string key");
		if (scan_string(sc, depth == 0 ? &sc->key : NULL) < 0)
			return -1;
		skip_ws(sc);
		if (sc->p >= sc->end || *sc->p != ':')
			return scan_fail(sc, "expected ':'");
		sc->p++;
		skip_ws(sc);
		if ((depth == 0 ? scan_member(sc, &sc->key) : scan_value(sc, depth)) < 0)
			return -1;
		skip_ws(sc);
		if (sc->p < sc->end && *sc->p == '}') {
			sc->p++;
			return 0;
		}
		if (sc->p >= sc->end || *sc->p != ',')
			return scan_fail(sc, "expected ',' or '}'");
		sc->p++;
		skip_ws(sc);
	}
}

/* Validates the config as one JSON object and fills `config` and `cni_version`. */
static void scan_config(const unsigned char *buf, size_t len)
{
	struct scanner sc = {.start = buf, .p = buf, .end = buf + len, .err = NULL, .key = {.len = 0}};
	skip_ws(&sc);
	if (sc.p >= sc.end || *sc.p != '{')
		fail(CNI_ERR_DECODE, "network config on stdin is not a JSON object");
	if (scan_object(&sc, 0) == 0) {
		skip_ws(&sc);
		if (sc.p != sc.end)
			scan_fail(&sc, "data after the top-level object");
	}
	if (sc.err)
		fail(CNI_ERR_DECODE, "network config on stdin is not valid JSON: %s at byte %zu", sc.err,
		     (size_t)(sc.p - sc.start));
	/* Taken as a plugin config, a list would be relayed to the default socket, its plugins' own
	 * "socket" unseen: the agent would then answer for a config that is not podwire's. */
	if (config.is_list)
		fail(CNI_ERR_INVALID_CONFIG,
		     "network config on stdin is a whole network list (a conflist: it has \"plugins\": [...]), "
		     "not one plugin's config; runtimes pass each plugin its own entry of \"plugins\" with the "
		     "list's \"name\" and \"cniVersion\" added: pass podwire's entry alone");
	if (config.socket_err)
		fail(CNI_ERR_INVALID_CONFIG, "%s", config.socket_err);
}

/* ---- relaying ---------------------------------------------------------------------------------- */

static unsigned char stdin_buf[STDIN_MAX + 1];

static size_t read_stdin(void)
{
	size_t len = 0;
	while (len < sizeof(stdin_buf)) {
		ssize_t n = read(STDIN_FILENO, stdin_buf + len, sizeof(stdin_buf) - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fail(CNI_ERR_IO, "cannot read the network config from stdin: %s", strerror(errno));
		}
		if (n == 0)
			return len;
		len += (size_t)n;
	}
	fail(CNI_ERR_INVALID_CONFIG, "network config on stdin exceeds %u bytes", STDIN_MAX);
}

/* The request head: the length prefix and the CNI_* variables. Caller frees. */
static unsigned char *build_env_block(size_t *out_len)
{
	size_t n = 0;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "CNI_", 4) == 0 && strchr(*e, '=')) /* an entry without '=' is no variable */
			n += strlen(*e) + 1;
	if (n > UINT32_MAX)
		fail(CNI_ERR_INVALID_CONFIG, "CNI_* environment exceeds 4 GiB");
	unsigned char *buf = malloc(4 + n);
	if (!buf)
		fail(CNI_ERR_IO, "out of memory for the CNI_* environment (%zu bytes)", n);
	buf[0] = (unsigned char)(n >> 24), buf[1] = (unsigned char)(n >> 16);
	buf[2] = (unsigned char)(n >> 8), buf[3] = (unsigned char)n;
	size_t at = 4;
	for (char **e = environ; *e; e++) {
		if (strncmp(*e, "CNI_", 4) == 0 && strchr(*e, '=')) {
			size_t len = strlen(*e) + 1; /* with its NUL */
			memcpy(buf + at, *e, len);
			at += len;
		}
	}
	*out_len = at;
	return buf;
}

static const char *agent_path(void)
{
	return config.has_socket ? config.socket.buf : DEFAULT_SOCKET;
}

/*
 * The agent could not give an answer: code 11, so the runtime retries. STATUS asks precisely whether
 * ADD can be served, and the spec's answer for "no" is 50 (plugin not available).
 */
static int agent_down_code(void)
{
	const char *cmd = getenv("CNI_COMMAND");
	return (cmd && strcmp(cmd, "STATUS") == 0) ? CNI_ERR_NOT_AVAILABLE : CNI_ERR_TRY_AGAIN;
}

__attribute__((noreturn)) static void unreachable(int err)
{
	int code = agent_down_code();
	if (err == EAGAIN || err == EWOULDBLOCK) /* SO_RCVTIMEO or SO_SNDTIMEO expired */
		fail(code, "podwire agent unreachable at %s: no progress within %d s", agent_path(), AGENT_TIMEOUT_S);
	fail(code, "podwire agent unreachable at %s: %s", agent_path(), strerror(err));
}

static int connect_agent(void)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	const char *path = agent_path();
	memcpy(addr.sun_path, path, strlen(path) + 1); /* fits: scan_config checked the length */

	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fail(CNI_ERR_IO, "cannot create a unix socket: %s", strerror(errno));
	/* Bounds connect (on a full backlog), every send and every receive: a hung agent never hangs
	 * the runtime. */
	struct timeval tv = {.tv_sec = AGENT_TIMEOUT_S, .tv_usec = 0};
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		fail(CNI_ERR_IO, "cannot set the agent socket timeout: %s", strerror(errno));
	while (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EISCONN) /* an interrupted connect completed meanwhile */
			break;
		unreachable(errno);
	}
	/*
	 * Only root's listener is the agent. The relay runs as root and sends the pod's CNI_* variables;
	 * whatever answers ADD becomes the pod's network result. A socket path in a directory others can
	 * write to may have any user's listener behind it: refuse it before a byte is sent. Same code as
	 * an agent that is not there (11, 50 for STATUS): the agent, when it starts, replaces the socket
	 * file (src/agent/unix-listen.ts), and then a retry reaches it.
	 */
	struct ucred peer;
	socklen_t peer_len = sizeof(peer);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_len) < 0)
		fail(CNI_ERR_IO, "cannot read the credentials of the listener at %s: %s", path, strerror(errno));
	if (peer.uid != 0)
		fail(agent_down_code(),
		     "podwire agent unreachable at %s: the listener there runs as uid %u, not root; nothing sent",
		     path, (unsigned)peer.uid);
	return fd;
}

static int is_version_call(void)
{
	const char *cmd = getenv("CNI_COMMAND");
	return cmd && strcmp(cmd, "VERSION") == 0;
}

static int is_blank(const unsigned char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && buf[i] != '\r')
			return 0;
	return 1;
}

/*
 * VERSION is answered here, never relayed: its stdin is {"cniVersion": ...} alone (SPEC.md), with no
 * "socket" key, so the relay cannot know which agent to ask; and libcni's ValidateNetworkList probes
 * every plugin with it (podman 4.3 drops a network whose plugin fails the probe, CRI-O reports it).
 * The answer depends on nothing but the build. Same shape as the agent's: the requested version when
 * supported, else the latest.
 */
__attribute__((noreturn)) static void answer_version(void)
{
	const char *answer = supported_version(cni_version);
	if (!answer)
		answer = DEFAULT_CNI_VERSION;
	struct out o = {.len = 0};
	out_str(&o, "{\"cniVersion\":");
	out_json_string(&o, answer);
	out_str(&o, ",\"supportedVersions\":[");
	for (size_t i = 0; i < N_SUPPORTED; i++) {
		out_str(&o, i ? ",\"" : "\"");
		out_str(&o, SUPPORTED_VERSIONS[i]);
		out_str(&o, "\"");
	}
	out_str(&o, "]}\n");
	if (write_all(STDOUT_FILENO, o.buf, o.len) < 0) {
		dprintf(STDERR_FILENO, "podwire-cni: writing the VERSION answer: %s\n", strerror(errno));
		exit(1);
	}
	exit(0);
}

/*
 * For a person who runs the binary by hand: runtimes execute a plugin with no arguments (the call is
 * in CNI_COMMAND and stdin), so an argument can only come from a shell. Only these words are taken;
 * anything else is left alone and the relay runs as a runtime would have it.
 */
static int is_arg(const char *arg, const char *a, const char *b, const char *c)
{
	return strcmp(arg, a) == 0 || strcmp(arg, b) == 0 || strcmp(arg, c) == 0;
}

__attribute__((noreturn)) static void answer_person(const char *arg)
{
	struct out o = {.len = 0};
	if (is_arg(arg, "version", "--version", "-v")) {
		out_str(&o, "podwire-cni: the CNI plugin of podwire, a relay to the podwire agent\nCNI spec versions:");
		for (size_t i = 0; i < N_SUPPORTED; i++) {
			out_str(&o, " ");
			out_str(&o, SUPPORTED_VERSIONS[i]);
		}
		out_str(&o, "\n");
	} else {
		out_str(&o,
			"usage: CNI_COMMAND=ADD|DEL|CHECK|GC|STATUS|VERSION CNI_CONTAINERID=... CNI_NETNS=... CNI_IFNAME=...\n"
			"           CNI_PATH=... podwire-cni < NETWORK-CONFIG\n"
			"       podwire-cni --help | version\n"
			"\n"
			"The CNI plugin of podwire. A container runtime runs it, with no arguments: the call is in the\n"
			"CNI_* environment and one plugin's network config on stdin (one entry of a conflist's \"plugins\",\n"
			"not the whole list). It does no networking itself: it relays the call to the podwire agent on the\n"
			"unix socket named by the config's \"socket\" (default " DEFAULT_SOCKET ") and prints the\n"
			"agent's answer. When no agent answers, it prints a CNI error: code 11 (try again later), 50 for\n"
			"STATUS. VERSION is answered without the agent.\n"
			"\n"
			"Start the agent first (podwire agent --config FILE); `podwire status` shows it.\n");
	}
	if (write_all(STDOUT_FILENO, o.buf, o.len) < 0)
		exit(1);
	exit(0);
}

int main(int argc, char **argv)
{
	/* A write to an agent that went away must fail with EPIPE, not kill the relay silently. */
	signal(SIGPIPE, SIG_IGN);

	if (argc > 1 && (is_arg(argv[1], "--help", "-h", "help") || is_arg(argv[1], "version", "--version", "-v")))
		answer_person(argv[1]); /* does not return */

	size_t config_len = read_stdin();
	if (is_version_call()) {
		if (!is_blank(stdin_buf, config_len))
			scan_config(stdin_buf, config_len);
		answer_version(); /* does not return */
	}
	scan_config(stdin_buf, config_len);

	size_t head_len;
	unsigned char *head = build_env_block(&head_len);
	int fd = connect_agent();
	/*
	 * EPIPE or ECONNRESET while sending: the agent stopped reading, and may have answered first (a
	 * request over its size limit: it answers with code 6 then closes). Read what it left; only
	 * without an answer is the send error the result.
	 */
	int send_err = 0;
	if (write_all(fd, head, head_len) < 0 || write_all(fd, stdin_buf, config_len) < 0)
		send_err = errno;
	if (send_err && send_err != EPIPE && send_err != ECONNRESET)
		unreachable(send_err);
	free(head);
	if (!send_err && shutdown(fd, SHUT_WR) < 0)
		unreachable(errno);

	/* Buffer the whole answer: if the agent fails halfway, stdout still gets one clean error object. */
	size_t cap = 4096, len = 0;
	unsigned char *answer = malloc(cap);
	if (!answer)
		fail(CNI_ERR_IO, "out of memory for the agent's answer");
	for (;;) {
		if (len == cap) {
			if (cap >= ANSWER_MAX)
				fail(CNI_ERR_INTERNAL, "podwire agent at %s sent an answer over %u bytes", agent_path(),
				     ANSWER_MAX);
			cap *= 2;
			unsigned char *grown = realloc(answer, cap);
			if (!grown)
				fail(CNI_ERR_IO, "out of memory for the agent's answer (%zu bytes)", cap);
			answer = grown;
		}
		ssize_t n = read(fd, answer + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* A unix socket reports the reset only once every byte sent before it was read: what
			 * came is all the agent wrote, as at EOF. */
			if (errno == ECONNRESET && len > 0)
				break;
			unreachable(send_err && errno == ECONNRESET ? send_err : errno);
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (len == 0 && send_err)
		unreachable(send_err);
	if (len == 0)
		fail(agent_down_code(), "podwire agent unreachable at %s: connection closed without an answer",
		     agent_path());

	int status = answer[0];
	if (write_all(STDOUT_FILENO, answer + 1, len - 1) < 0) {
		dprintf(STDERR_FILENO, "podwire-cni: writing the agent's answer to stdout: %s\n", strerror(errno));
		if (status == 0)
			status = 1; /* the runtime must not take a missing result for success */
	}
	free(answer);
	return status;
}
