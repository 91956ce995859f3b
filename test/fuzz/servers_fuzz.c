/*
 * servers_fuzz.c
 *	  libFuzzer target for redlock_servers_parse (src/servers.c), the redlock.servers
 *	  parser.  Built by test/fuzz/run with -fsanitize=fuzzer,address,undefined.
 *
 * Each input is taken as the text of a redlock.servers value (cut at its first NUL, as a
 * GUC string would be).  The harness aborts when an invariant of the parser's contract
 * does not hold:
 *	- on success: 0 <= count <= REDLOCK_MAX_NODES; count is 0 exactly when the value is
 *	  blank, else the number of comma-separated items; every host is non-empty and
 *	  NUL-terminated inside its buffer; port is 0 for a socket path (host starts with
 *	  "/") and 1..65535 otherwise; no (host, port) pair appears twice; and printing the
 *	  list back with redlock_node_addr_name (host:port, [ipv6]:port, path) parses to
 *	  the same list;
 *	- on failure: errbuf holds a non-empty, NUL-terminated message within errlen;
 *	- with a tiny errbuf the message is still NUL-terminated and nothing overflows.
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redlock.h"
#include "servers.h"

#define CHECK(cond) \
	do { \
		if (!(cond)) \
		{ \
			fprintf(stderr, "invariant violated at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			abort(); \
		} \
	} while (0)

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
is_blank(const char *s)
{
	for (; *s; s++)
		if (!isspace((unsigned char) *s))
			return false;
	return true;
}

/* Checks a parse result against the contract; returns nothing, aborts on violation. */
static void
check_result(const char *value, RedlockServerList *list, const char *errbuf, size_t errlen)
{
	if (list == NULL)
	{
		CHECK(memchr(errbuf, '\0', errlen) != NULL);
		CHECK(errbuf[0] != '\0');
		return;
	}

	CHECK(list->count >= 0 && list->count <= REDLOCK_MAX_NODES);
	if (is_blank(value))
		CHECK(list->count == 0);
	else
	{
		int			items = 1;

		for (const char *c = value; *c; c++)
			if (*c == ',')
				items++;
		CHECK(list->count == items);
	}

	for (int i = 0; i < list->count; i++)
	{
		const RedlockNodeAddr *a = &list->nodes[i];
		size_t		hlen = strnlen(a->host, sizeof(a->host));

		CHECK(hlen < sizeof(a->host));
		CHECK(hlen > 0);
		CHECK(a->port >= 0 && a->port <= 65535);
		if (a->host[0] == '/')
			CHECK(a->port == 0);
		else
			CHECK(a->port >= 1);
		for (int j = 0; j < i; j++)
			CHECK(!(list->nodes[j].port == a->port &&
					strcmp(list->nodes[j].host, a->host) == 0));
	}
}

/*
 * Prints LIST back as a redlock.servers value, with redlock_node_addr_name (the names
 * used in messages), into a malloc'd string.
 */
static char *
unparse(const RedlockServerList *list)
{
	size_t		cap = (size_t) list->count * (REDLOCK_MAX_ADDR_LEN + 16) + 1;
	char	   *out = malloc(cap);
	size_t		len = 0;

	CHECK(out != NULL);
	out[0] = '\0';
	for (int i = 0; i < list->count; i++)
	{
		char		name[REDLOCK_MAX_ADDR_LEN + 16];

		redlock_node_addr_name(&list->nodes[i], name, sizeof(name));
		CHECK(strlen(name) < sizeof(name) - 1);		/* not truncated */
		CHECK(strlen(name) >= strlen(list->nodes[i].host));
		len += snprintf(out + len, cap - len, "%s%s", i ? "," : "", name);
		CHECK(len < cap);
	}
	return out;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *value = malloc(size + 1);
	char		errbuf[320];
	char		tiny[8];
	RedlockServerList *list;
	RedlockServerList *tiny_list;

	CHECK(value != NULL);
	memcpy(value, data, size);
	value[size] = '\0';

	memset(errbuf, 0x7f, sizeof(errbuf));
	list = redlock_servers_parse(value, errbuf, sizeof(errbuf));
	check_result(value, list, errbuf, sizeof(errbuf));

	/* The same input with a small error buffer: same verdict, terminated message. */
	memset(tiny, 0x7f, sizeof(tiny));
	tiny_list = redlock_servers_parse(value, tiny, sizeof(tiny));
	CHECK((tiny_list == NULL) == (list == NULL));
	if (tiny_list == NULL)
		CHECK(memchr(tiny, '\0', sizeof(tiny)) != NULL && tiny[0] != '\0');
	free(tiny_list);

	if (list != NULL)
	{
		/* Round trip: the canonical text of the list parses to the same list. */
		char	   *again_text = unparse(list);
		RedlockServerList *again = redlock_servers_parse(again_text, errbuf, sizeof(errbuf));

		if (again == NULL)
			fprintf(stderr, "canonical \"%s\" rejected: %s\n", again_text, errbuf);
		CHECK(again != NULL);
		CHECK(again->count == list->count);
		for (int i = 0; i < list->count; i++)
		{
			CHECK(again->nodes[i].port == list->nodes[i].port);
			CHECK(strcmp(again->nodes[i].host, list->nodes[i].host) == 0);
		}
		free(again);
		free(again_text);
		free(list);
	}

	/* NULL is taken as empty. */
	if (size == 0)
	{
		RedlockServerList *null_list = redlock_servers_parse(NULL, errbuf, sizeof(errbuf));

		CHECK(null_list != NULL && null_list->count == 0);
		free(null_list);
	}

	free(value);
	return 0;
}
