/*-------------------------------------------------------------------------
 *
 * servers.c
 *	  Parse a redlock.servers value into a list of Redis masters.
 *
 * The value is a comma-separated list of items, each one of
 *	  host[:port]		a host name or IPv4 address (port defaults to 6379)
 *	  [ipv6][:port]		an IPv6 address in brackets
 *	  /path/to/socket	a unix socket
 * White space around items is ignored; an empty value means no servers.  Duplicate
 * items are rejected, since each master must count once towards the quorum (spec §3).
 *
 * The parser uses malloc and no backend facility, so that it can run in a GUC check
 * hook (whose "extra" must be malloc'd) and in a stand-alone fuzz target.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"
#include "servers.h"

#include <ctype.h>
#include <stdlib.h>
#include <sys/un.h>

#include "redlock.h"

#define DEFAULT_REDIS_PORT 6379

/* The longest socket path connect() takes whole (sun_path less its NUL). */
#define REDLOCK_MAX_SOCKET_PATH_LEN (sizeof(((struct sockaddr_un *) 0)->sun_path) - 1)

/* Stores a message about item (of length len) in errbuf and returns false. */
static bool
servers_bad_item(char *errbuf, size_t errlen, const char *item, size_t len, const char *why)
{
	snprintf(errbuf, errlen, "invalid server \"%.*s\": %s", (int) Min(len, 200), item, why);
	return false;
}

/* Parses the decimal port in [s, end) into *port; false unless 1..65535. */
static bool
servers_parse_port(const char *s, const char *end, int *port)
{
	long		value = 0;

	if (s == end)
		return false;
	for (; s < end; s++)
	{
		if (!isdigit((unsigned char) *s))
			return false;
		value = value * 10 + (*s - '0');
		if (value > 65535)
			return false;
	}
	*port = (int) value;
	return value >= 1;
}

/* True when every character of [s, end) is allowed in a host name or IPv4 address. */
static bool
servers_valid_host(const char *s, const char *end)
{
	if (s == end)
		return false;
	for (; s < end; s++)
		if (!isalnum((unsigned char) *s) && *s != '.' && *s != '-' && *s != '_')
			return false;
	return true;
}

/* True when every character of [s, end) is allowed in a bracketed IPv6 address. */
static bool
servers_valid_ipv6(const char *s, const char *end)
{
	if (s == end)
		return false;
	for (; s < end; s++)
		if (!isxdigit((unsigned char) *s) && *s != ':' && *s != '.')
			return false;
	return true;
}

/* Parses one trimmed, non-empty item [item, item + len) into *addr. */
static bool
servers_parse_item(const char *item, size_t len, RedlockNodeAddr *addr, char *errbuf, size_t errlen)
{
	const char *end = item + len;
	const char *host = item;
	const char *host_end;
	const char *colon;

	addr->port = DEFAULT_REDIS_PORT;

	if (item[0] == '/')
	{
		/* Longer paths would be cut to sun_path's size, and two could meet there. */
		if (len > Min(REDLOCK_MAX_ADDR_LEN, REDLOCK_MAX_SOCKET_PATH_LEN))
			return servers_bad_item(errbuf, errlen, item, len, "socket path is too long");
		memcpy(addr->host, item, len);
		addr->host[len] = '\0';
		addr->port = 0;
		return true;
	}

	/* Two mistakes worth naming: another list's separator, and a URL. */
	if (memchr(item, ';', len))
		return servers_bad_item(errbuf, errlen, item, len,
						"items are separated by commas, not semicolons");
	for (const char *c = item; c + 3 <= end; c++)
		if (memcmp(c, "://", 3) == 0)
			return servers_bad_item(errbuf, errlen, item, len,
							"a URL is not accepted: write host:port, without a scheme such as \"redis://\"");

	if (item[0] == '[')
	{
		const char *close = memchr(item, ']', len);

		if (close == NULL)
			return servers_bad_item(errbuf, errlen, item, len, "missing \"]\" after IPv6 address");
		host = item + 1;
		host_end = close;
		if (!servers_valid_ipv6(host, host_end))
			return servers_bad_item(errbuf, errlen, item, len, "invalid IPv6 address");
		if (close + 1 < end)
		{
			if (close[1] != ':' || !servers_parse_port(close + 2, end, &addr->port))
				return servers_bad_item(errbuf, errlen, item, len,
								"port must be a number from 1 to 65535");
		}
	}
	else
	{
		colon = memchr(item, ':', len);
		host_end = colon ? colon : end;
		if (!servers_valid_host(host, host_end))
			return servers_bad_item(errbuf, errlen, item, len,
							"expected host:port, [ipv6]:port or a socket path");
		if (colon && !servers_parse_port(colon + 1, end, &addr->port))
			return servers_bad_item(errbuf, errlen, item, len,
							"port must be a number from 1 to 65535");
	}

	if ((size_t) (host_end - host) > REDLOCK_MAX_ADDR_LEN)
		return servers_bad_item(errbuf, errlen, item, len, "host name is too long");
	memcpy(addr->host, host, host_end - host);
	addr->host[host_end - host] = '\0';
	return true;
}

/*
 * redlock_servers_parse
 *		Parses a redlock.servers value.
 *
 * value: the setting's text (NULL is taken as empty).
 * errbuf, errlen: where a message naming the bad item is written on failure.
 *
 * Returns a malloc'd list (count 0 for an empty value), or NULL with errbuf set when an
 * item is invalid, duplicated, or there are more than REDLOCK_MAX_NODES items, or when
 * memory runs out.  Raises nothing.
 */
RedlockServerList *
redlock_servers_parse(const char *value, char *errbuf, size_t errlen)
{
	RedlockServerList *list;
	const char *p = value ? value : "";
	int			max_items = 1;

	for (const char *c = p; *c; c++)
		if (*c == ',')
			max_items++;
	if (max_items > REDLOCK_MAX_NODES)
	{
		snprintf(errbuf, errlen, "more than %d servers", REDLOCK_MAX_NODES);
		return NULL;
	}

	list = malloc(offsetof(RedlockServerList, nodes) + max_items * sizeof(RedlockNodeAddr));
	if (list == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	list->count = 0;

	/* An empty or all-blank value is "no servers". */
	while (isspace((unsigned char) *p))
		p++;
	if (*p == '\0')
		return list;

	for (;;)
	{
		const char *start = p;
		const char *stop = strchr(p, ',');
		const char *end = stop ? stop : p + strlen(p);
		RedlockNodeAddr *addr = &list->nodes[list->count];

		while (start < end && isspace((unsigned char) *start))
			start++;
		while (end > start && isspace((unsigned char) end[-1]))
			end--;
		if (start == end)
		{
			snprintf(errbuf, errlen, "empty item in server list");
			free(list);
			return NULL;
		}
		if (!servers_parse_item(start, end - start, addr, errbuf, errlen))
		{
			free(list);
			return NULL;
		}
		for (int i = 0; i < list->count; i++)
		{
			if (list->nodes[i].port == addr->port &&
				strcmp(list->nodes[i].host, addr->host) == 0)
			{
				servers_bad_item(errbuf, errlen, start, end - start,
						 "listed twice; each master must count once");
				free(list);
				return NULL;
			}
		}
		list->count++;

		if (stop == NULL)
			break;
		p = stop + 1;
	}
	return list;
}

/*
 * redlock_node_addr_name
 *		Writes addr as "host:port", "[ipv6]:port" or the socket path into buf (len bytes).
 */
void
redlock_node_addr_name(const RedlockNodeAddr *addr, char *buf, size_t len)
{
	if (addr->port == 0)
		snprintf(buf, len, "%s", addr->host);
	else if (strchr(addr->host, ':'))
		snprintf(buf, len, "[%s]:%d", addr->host, addr->port);
	else
		snprintf(buf, len, "%s:%d", addr->host, addr->port);
}
